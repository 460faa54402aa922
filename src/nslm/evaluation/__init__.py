"""Scoring: per-position log-probabilities → per-class perplexity tables (SPEC §5)."""

from nslm.evaluation.perplexity import class_perplexities, perplexity

__all__ = ["class_perplexities", "perplexity"]
