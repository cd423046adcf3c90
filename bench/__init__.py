"""Salon's benchmarks: ``python -m bench [NAME ...] [--json]``."""
