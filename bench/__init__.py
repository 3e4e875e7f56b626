"""Benchmarks: speed and scale are measured here, never asserted in tests."""
