"""Several models at once on the one MLX thread: the loaded models and the memory budget they
share (`model_pool.py`, `memory_budget.py`, `hosted_model.py`), loading a model in slices
between the other models' steps (`model_loader.py`), which model a request runs on and the
requests waiting for a load (`request_router.py`, `waiting_requests.py`), which model steps next
(`fair_share.py`), what each model's EngineCore is made with (`core_factory.py`), token counts
without loading weights (`tokenizer_counts.py`) and the per-model statistics (`stats_board.py`).
"""
