"""`python -m engine.bench`: our engine against mlx-lm's own batching, side by side in one process."""
