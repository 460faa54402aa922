"""A run directory: the trained model, its micro-models and what it needs to run alone."""
