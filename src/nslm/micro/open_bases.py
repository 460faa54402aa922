"""The base distributions v(w | ctx) of the open micro-models (:mod:`nslm.micro.open_set`).

Each is a proper distribution over its class's open set O_c, read through the calls of
:class:`Base`: ``components(ctx)`` (what does not depend on the fitted mixing weights, over
V_c's columns), ``mix(parts, seen)`` (log v over V_c; ``seen`` the members a counting half
has seen, while deleted estimation runs), ``log_v_strings`` (log v of given strings outside
V_c), ``candidates_new`` (strings worth ranking as new members), and the free parameters
that deleted estimation fits (``free_start``, ``with_free``).

* :class:`nslm.micro.open_enumerated.EnumeratedBase`: years, days and places, O_c listed;
* :class:`nslm.micro.open_values.ValueBase`: the other number classes, O_c every canonical
  spelling the class's rule keeps.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from nslm.data.corpus import Split
from nslm.data.numbers import NUMBER_CLASSES
from nslm.data.places import PLACE_CLASSES
from nslm.micro.fit_checks import Parameter
from nslm.micro.history import Context
from nslm.micro.model import MicroModel
from nslm.micro.open_enumerated import EnumeratedBase
from nslm.micro.open_values import ValueBase

ENUMERATED = ("year", "day", *PLACE_CLASSES)
OPEN_CLASSES = tuple(dict.fromkeys([*NUMBER_CLASSES, *PLACE_CLASSES]))


class Base(Protocol):
    def components(self, ctx: Context) -> dict[str, np.ndarray]: ...
    def mix(self, parts: dict[str, np.ndarray], seen: np.ndarray | None = None) -> np.ndarray: ...
    def log_v_strings(self, strings: list[str], ctx: Context) -> np.ndarray: ...
    def candidates_new(self, ctx: Context) -> list[str]: ...
    def in_support(self) -> np.ndarray: ...
    def free_start(self) -> list[float]: ...
    def free_parameters(self) -> list[Parameter]: ...
    def with_free(self, theta: np.ndarray) -> Base: ...
    def get_params(self) -> dict[str, Any]: ...


def make_base(micro: MicroModel, train: Split | None, params: dict | None = None) -> Base:
    """The base of ``micro``'s class, fitted on ``train`` (or rebuilt from ``params``)."""
    name = micro.cls.name
    if name in ENUMERATED:
        return EnumeratedBase.build(micro, params)
    if name in NUMBER_CLASSES:
        return ValueBase.build(micro, train, params)
    raise ValueError(f"<{name}> has no open set")
