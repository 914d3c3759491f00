"""The visibility API: pending units in round order, served as an aggregated API group."""
