"""Live events of jobs and batches, derived from their database rows (see service.py)."""
