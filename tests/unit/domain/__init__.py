"""Unit tests of the pure quota core (koordqueue.domain), SPEC sections 1-2."""
