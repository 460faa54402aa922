"""The paper's synthetic experiments, each a function returning a JSON-ready dict.

``increment`` is Table 7 (the increment function f(n) = n + 1). Each experiment runs the real
pipeline (prepare → train → fit micro-models → score), only on a corpus it generates.
"""

from nslm.experiments.increment import IncrementConfig, run_increment

__all__ = ["IncrementConfig", "run_increment"]
