"""Tests of the `koordqueue` command line: simulate, explain, golden outputs, docs in sync."""
