"""Text generation from a prompt for every nslm LM: shared sampling, per-LM loops.

Temperature, top-k, top-p and a seed: docs/ngram.md and docs/nslm.md, "Generation".
"""
