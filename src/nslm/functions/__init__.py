"""Functions that compute the numbers a text is about to write (docs/functions.md).

A function reads the numbers before a position (a quantity and its unit, a year and a dash,
a birth year and an event) and computes what the text will write next; a fitted
:class:`FunctionModel` says how the result is written and how sure the function is, and a
host model (the LSTM NSLM, a Transformer, ``nslm check``) mixes it in. Users add their own
with :func:`register_function` (see :mod:`nslm.functions.base`).

Reading order: ``base`` (what a function is), ``writing`` (how a number is written),
``builtin`` (the functions), ``documents`` (texts as documents of tokens), ``model`` (the
fitted writing PDFs and confidences), ``check`` (``nslm check``), ``fitted`` (fitted on
WikiText-2 and cached), ``api`` (``nslm.check``)."""

from nslm.functions import builtin as _builtin  # noqa: F401  (registers the built-in functions)
from nslm.functions.base import (
    Function,
    Option,
    Reference,
    function_names,
    get_function,
    register_function,
)
from nslm.functions.model import FunctionModel
from nslm.functions.writing import significant_figures, written

__all__ = [
    "Function",
    "FunctionModel",
    "Option",
    "Reference",
    "function_names",
    "get_function",
    "register_function",
    "significant_figures",
    "written",
]
