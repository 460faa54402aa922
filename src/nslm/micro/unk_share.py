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

from collections.abc import Sequence

import numpy as np

from nslm.data.corpus import Split


def fit_unk_shares(train: Split, class_names: Sequence[str], names: Sequence[str]) -> dict:
    """ρ_c for each class in ``names`` from ``train`` (module docstring), with the counts."""
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
        "rho": {c: float(new_by_class[class_names.index(c)] / max(new_total, 1)) for c in names},
        "new_tokens": int(new_total),
        "new_tokens_by_class": {c: int(new_by_class[class_names.index(c)]) for c in names},
    }
