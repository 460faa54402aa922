"""Scores: a trained model and its micro-models turned into per-position
log-probabilities (the one scoring pass), the NSLM of paper Eq. 4 and the ensemble."""
