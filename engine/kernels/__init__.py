"""Custom GPU kernels that stand in for slow mlx-lm fallbacks on backends mlx-lm has no kernel for."""
