"""Several models at once on the one MLX thread: the loaded models and their memory budget
(`model_pool.py`, `memory_budget.py`), loading a model in slices between engine steps
(`model_loader.py`), requests waiting for a model to load (`waiting_requests.py`), and which
model steps next (`fair_share.py`)."""
