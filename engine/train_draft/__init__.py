"""Training of the default model's EAGLE-style draft head (`python -m engine.train_draft`);
never imported by the app."""
