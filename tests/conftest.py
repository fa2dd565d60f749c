"""Shared test set-up: OpenBLAS must be interposed before anything imports mlx.core."""

import engine  # noqa: F401
