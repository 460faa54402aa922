"""Neural LMs: backbones (LSTM, AWD-LSTM, Transformer) and the NNLM / HNLM heads."""

from nslm.models.heads import HNLMHead, NNLMHead
from nslm.models.hnlm_layout import HNLMLayout
from nslm.models.lm import LanguageModel

__all__ = ["HNLMHead", "HNLMLayout", "LanguageModel", "NNLMHead"]
