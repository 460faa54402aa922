"""ρ_c: the share of the LM's P(``<unk>`` | h) that goes to class c's new members.

The open micro-models' default estimator takes a class's new-member mass from its known
members (:mod:`nslm.micro.open_set`), so every known member pays for the new ones. The LM
already reserves P(``<unk>`` | h) for strings outside its vocabulary; this estimator gives
class c a share ρ_c of it instead, and the spelling model the rest:

    P(s | h) = P(<unk> | h) · [(1 − Σ_c ρ_c) · P_spell(s | s ∉ V) + Σ_c ρ_c · P_new(s | c, ctx)]

for s outside the vocabulary, with P_new the open model's distribution over its new members
(P_open(s | c, ctx) / P_open(new | c, ctx)), while a known member keeps its closed
micro-model's P(w | c, ctx). Summed over all strings the two readings of P(``<unk>`` | h)
give it back whole, so the model stays a distribution.

ρ_c is fitted on the training halves, as the escape is: the training articles are split in
two by parity, and of the tokens of one half whose type the other half never holds (what
that half's vocabulary would call ``<unk>``), ρ_c is the share whose rule class is c, both
ways round (maximum likelihood of a multinomial over "which class is this new token").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nslm.data.corpus import Split
from nslm.errors import NslmError

NEW_MASS = ("escape", "unk", "escape+unk")  # where the new members' mass comes from


@dataclass(frozen=True)
class NewMass:
    """Where NSLM-open's new members take their mass from (``how``, one of :data:`NEW_MASS`):
    ``escape``, the open micro-model's, from its known members; ``unk``, a share ρ_c of
    P(``<unk>`` | h), the known members keeping the closed micro-model's; ``escape+unk``,
    both. ``rho``: ρ_c by class name. A run keeps the one chosen on valid in RUN/open.json
    (:func:`nslm.evaluation.open_report.fit_run_new_mass`)."""

    how: str = "escape"
    rho: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.how not in NEW_MASS:
            raise NslmError(f"new-member mass {self.how!r}: choose {', '.join(NEW_MASS)}")
        if self.how != "escape" and not self.rho:
            raise NslmError(f"new-member mass {self.how!r} needs ρ per class")
        if sum(self.rho.values()) >= 1:
            raise NslmError("ρ: the classes' shares of P(<unk>) must sum to less than one")

    @property
    def escape(self) -> bool:
        """Whether the known members pay for the new ones (the open micro-model's P_open)."""
        return self.how != "unk"

    @property
    def shares_unk(self) -> bool:
        """Whether the classes take a share of P(<unk> | h)."""
        return self.how != "escape"

    def log_rho(self, name: str) -> float:
        r = self.rho.get(name, 0.0) if self.shares_unk else 0.0
        return math.log(r) if r > 0 else -math.inf

    @property
    def log_spelled(self) -> float:
        """log of the share of P(<unk> | h) left to the spelling model: log(1 − Σρ)."""
        return math.log1p(-sum(self.rho.values())) if self.shares_unk else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"kept": self.how, "rho": dict(self.rho)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> NewMass:
        if not data:
            return cls()
        try:
            return cls(str(data["kept"]), {str(k): float(v) for k, v in data["rho"].items()})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise NslmError(f"open.json: malformed new_mass ({exc})") from None


def fit_unk_shares(
    train: Split,
    class_names: Sequence[str],
    names: Sequence[str],
    closed: Sequence[str] = (),
) -> dict:
    """ρ_c for each class in ``names`` from ``train`` (module docstring), with the counts;
    the ``closed`` classes, whose open set is their vocabulary (no new member to give a
    share to), get ρ_c = 0 and their tokens stay with the spelling model."""
    halves = train.article_ids % 2
    new_by_class = np.zeros(len(class_names))
    new_total = 0
    for h in (0, 1):
        counted = np.zeros(int(train.token_ids.max()) + 1, dtype=bool)
        counted[train.token_ids[halves == h]] = True
        held = np.flatnonzero(halves != h)
        new = held[~counted[train.token_ids[held]]]
        new_total += len(new)
        new_by_class += np.bincount(train.rule_class_ids[new], minlength=len(class_names))
    return {
        "rho": {
            c: 0.0 if c in closed else float(new_by_class[class_names.index(c)] / max(new_total, 1))
            for c in names
        },
        "closed": sorted(closed),
        "new_tokens": int(new_total),
        "new_tokens_by_class": {c: int(new_by_class[class_names.index(c)]) for c in names},
    }
