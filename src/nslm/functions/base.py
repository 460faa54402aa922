"""What a function is: a rule that computes the number a text is about to write from
numbers it already wrote, and the registry user functions join.

A function reads a document's tokens before position ``i`` (corpus tokens: numbers joined,
``1,200``, en dashes as ``–``) and, where its trigger matches, returns a
:class:`Reference`: the value or values it computes and the ways each may be written
(:class:`Option`: a key naming the way, the string it gives). Whether the text then writes
one of them, and which way, is learnt from training text by
:class:`~nslm.functions.model.FunctionModel`: the keys' shares (how results are written)
and a logistic confidence (how sure the function is in this context).

This is Demeter & Downey's micro-model with the previous value replaced by a function of
the context: P_MM(w | context) = pdf(how w writes f(context)) (paper Eq. 1, docs/functions.md).

A user function::

    from nslm.functions import Function, Option, Reference, register_function

    @register_function
    class DoubleIt(Function):
        name = "double"
        description = "twice the number before 'doubled to'"

        def reference(self, tokens, i):
            if i >= 3 and tokens[i - 2 : i] == ["doubled", "to"] and is_number(tokens[i - 3]):
                value = 2 * number_value(tokens[i - 3])
                return Reference(self.name, (Option("exact", written(value)),), value, (i - 3,))
            return None
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nslm.data.numbers import is_number, number_value
from nslm.errors import NslmError, lookup

LIKELY = 0.02  # a result given less than this is no reading a number agrees with


@dataclass(frozen=True)
class Option:
    """One way the function's result may be written: ``key`` names the way (the writing
    PDF's outcome: "short" for a season's ``96``, ``u0:+1`` for a conversion into the first
    target unit with one more significant figure), ``text`` the corpus string it gives."""

    key: str
    text: str


@dataclass(frozen=True)
class Reference:
    """What a function computes at a position.

    ``options``: the ways to write the result (a string may come from several keys);
    ``value``: the exact result (the first, where there are several), for messages;
    ``read``: the positions of the tokens the function read; ``conditions``: what the
    writing PDF is conditioned on, coarse to fine, each level backing off to the one
    before (a conversion: the input's precision, then its unit, then its magnitude);
    ``features``: what the confidence reads besides the context words; ``detail``: the
    computation in words; ``exact``: the exact results, where they are not the options'
    own values (a conversion's, one per unit); ``style``: what a document writes the same
    way each time (a conversion: its unit and precision, so that an article that wrote
    "28.65 metres ( 94 ft 0 in )" writes its next length in metres so too), empty for a
    function whose writing a document does not keep.
    """

    function: str
    options: tuple[Option, ...]
    value: float
    read: tuple[int, ...]
    conditions: tuple[str, ...] = ()
    features: dict[str, float] = field(default_factory=dict)
    detail: str = ""
    exact: tuple[float, ...] = ()  # the exact results (a conversion: one per unit)
    style: str = ""

    def texts(self) -> set[str]:
        return {o.text for o in self.options}


class Function:
    """A named function of the context (subclass it and :func:`register_function` it).

    ``reference(tokens, i)`` reads only ``tokens[:i]`` (a model predicting ``tokens[i]``
    may use the result); ``fit(documents)`` may learn from training documents (the unit
    conversion learns which units each unit is converted to); ``params``/``load`` keep
    what it learnt as JSON.
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    # how far (a share of the value) a written result may be from the computed one and still
    # agree with it, beyond its last written place (a conversion rounded by hand)
    tolerance: ClassVar[float] = 0.0
    # whether ``nslm check`` judges a number by it: a function whose results are a spread of
    # likely values (a year some years on) says what is likely, not what is right
    checked: ClassVar[bool] = True

    def reference(self, tokens: Sequence[str], i: int) -> Reference | None:
        raise NotImplementedError

    def form(self, text: str, ref: Reference, following: Sequence[str] = ()) -> str:
        """A written token's *form*, what ``nslm check`` compares before values: by default
        its digits before and after the point (``96`` → ``2.0``, ``1996`` → ``4.0``; a word
        is ``word``), since after "1962 –" four digits are a span's end, two a season's.
        ``following``: the text's tokens after it, for a function whose form reads them."""
        if not is_number(text):
            return "word"
        whole, _, fraction = text.replace(",", "").partition(".")
        return f"{len(whole)}.{len(fraction)}"

    def agreeing(self, ref: Reference, probs: dict[str, float]) -> list[float]:
        """The values a written number may state, at its own precision, and agree with the
        function (``nslm check``): the reference's exact results where it has them, else the
        results it gives at least :data:`LIKELY` of its mass (``probs``: its distribution
        over strings)."""
        if ref.exact:
            return list(ref.exact)
        return [number_value(text) for text, p in probs.items() if p >= LIKELY and is_number(text)]

    def fit(self, documents: Sequence[Sequence[str]]) -> None:
        """Learn what the function needs from training documents (nothing by default)."""

    def params(self) -> dict[str, Any]:
        return {}

    def load(self, params: dict[str, Any]) -> None:
        """Restore what :meth:`params` wrote."""


_FUNCTIONS: dict[str, type[Function]] = {}


def register_function(cls: type[Function]) -> type[Function]:
    """Class decorator: make ``cls`` available under ``cls.name``."""
    if not cls.name or not cls.name.replace("_", "").isalnum():
        raise NslmError(f"function {cls.__name__}: give it a name of letters, digits and _")
    _FUNCTIONS[cls.name] = cls
    return cls


def get_function(name: str) -> type[Function]:
    return lookup(_FUNCTIONS, name, "function")


def function_names() -> list[str]:
    return list(_FUNCTIONS)
