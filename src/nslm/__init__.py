"""nslm: neural-symbolic language models that get numbers, dates and places right.

``nslm.load(path)`` opens a trained run or an n-gram model as the object for its kind
(:mod:`nslm.api`; docs/python.md).
"""

# The systems that plug into the core register with nslm.hooks when their package is
# imported; importing them here, with nslm itself, lets every entry point see them. Each
# package's __init__ is light: its entries import the system's modules when first used.
from nslm import byte_lm, numerals, word_pos  # noqa: F401
from nslm.errors import NslmError

__all__ = ["NslmError", "check", "load"]
__version__ = "0.1.0"


def load(path, *, micro: str = "auto", threads: bool | int = True):
    """The model at ``path`` (a run directory, an n-gram model directory or an ARPA file) as
    an :class:`~nslm.api.NslmRun`, :class:`~nslm.api.ByteRun`, :class:`~nslm.api.WordPosRun`
    or :class:`~nslm.api.NgramLM`; see :func:`nslm.api.load`."""
    from nslm.api import load as load_model  # on first use: `import nslm` stays light

    return load_model(path, micro=micro, threads=threads)


def check(text: str, *, threshold: float | None = None, input_format: str = "plain"):
    """The numbers of ``text`` that disagree with what a function computes from their
    context, as a :class:`~nslm.functions.api.CheckResult` (``nslm check``; see
    :func:`nslm.functions.api.check_text`)."""
    from nslm.functions.api import check_text

    return check_text(text, threshold=threshold, input_format=input_format)
