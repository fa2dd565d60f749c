"""Multi-token-prediction drafting from the model's own checkpoint: finding and reading the MTP
weights (checkpoint.py), building the MTP layer of each family (module.py), and the drafter
(drafter.py)."""
