"""Benchmark support code (not the benchmarks themselves)."""
