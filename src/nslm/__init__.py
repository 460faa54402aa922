"""nslm: neural-symbolic language models that get numbers, dates and places right.

``nslm.load(path)`` opens a trained run or an n-gram model as the object for its kind
(:mod:`nslm.api`; docs/python.md).
"""

from nslm.errors import NslmError

__all__ = ["NslmError", "load"]
__version__ = "0.1.0"


def load(path, *, micro: str = "auto", threads: bool | int = True):
    """The model at ``path`` (a run directory, an n-gram model directory or an ARPA file) as
    an :class:`~nslm.api.NslmRun`, :class:`~nslm.api.ByteRun`, :class:`~nslm.api.WordPosRun`
    or :class:`~nslm.api.NgramLM`; see :func:`nslm.api.load`."""
    from nslm.api import load as load_model  # on first use: `import nslm` stays light

    return load_model(path, micro=micro, threads=threads)
