"""nslm: neural-symbolic language models that get numbers, dates and places right."""

from nslm.errors import NslmError

__all__ = ["NslmError"]
__version__ = "0.1.0"
