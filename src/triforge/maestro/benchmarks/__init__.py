"""Benchmarks for maestro: loaders, splits and metrics."""
