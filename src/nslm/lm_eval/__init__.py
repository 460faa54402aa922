"""nslm in EleutherAI's lm-evaluation-harness (docs/lm-eval.md): every run kind that scores
text as an lm-eval model named ``nslm`` (:mod:`nslm.lm_eval.model`). Importing this package
registers it; ``nslm lm-eval …`` is lm-eval's own command line with it registered."""

from nslm.lm_eval.model import NslmLM

__all__ = ["NslmLM"]
