"""Speculative decoding inside the running batch: drafters (one per file), verification and
per-row cache rollback."""
