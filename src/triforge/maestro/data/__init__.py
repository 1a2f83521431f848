"""Data shipped with maestro (small sets for tests and CI)."""
