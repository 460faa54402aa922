"""Where functions fire over the Transformer: a root whose members are the run's and the
functions' strings, whether or not any class vocabulary holds them (docs/functions.md,
"Over the Transformer").

A function reads the corpus tokens before a word (``nslm.functions``); the word's first
Transformer token is a root of the mixture's walk (:mod:`nslm.transformer.mixture`), and
there the functions' strings join the run's members (:meth:`Members.with_strings`) with
the functions' weight W = Σ π̃ and their distribution P_fun
(:meth:`nslm.functions.FunctionModel.mixture`). A function's π is its share of the numbers
written where it fires, so over the Transformer it is scaled by λ_f (fitted on valid) and
by the class head's P(a number | h) = Σ_{number classes c} P(c | h) at the root:
π' = λ_f · P(a number | h) · π, and

    Q'(w) = (1 − W) · Q(w) + W · P_fun(w),    1 − G' = (1 − W) · (1 − G)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nslm.functions.model import FunctionModel
from nslm.transformer.candidates import Members
from nslm.transformer.mixture import FunctionRoot


@dataclass
class Site:
    """Where functions fire in a text: the root's members (the run's and every string a
    firing function offers) and each firing function's (name, π, P_f over strings)."""

    members: Members
    firings: list[tuple[str, float, dict[str, float]]]

    def mixture(
        self, scales: dict[str, float], number: float = 1.0
    ) -> tuple[float, dict[str, float]]:
        """(W, P_fun) with each function's confidence scaled by its λ_f and ``number``, the
        head's P(a number | h): π' = λ_f · P(a number | h) · π, W = Σ π' / max(1, Σ π'),
        P_fun = Σ π' P_f / Σ π' (as FunctionModel.mixture)."""
        weights = [(scales.get(name, 0.0) * number * pi, probs) for name, pi, probs in self.firings]
        total = sum(w for w, _ in weights)
        if total <= 0:
            return 0.0, {}
        mixed: dict[str, float] = {}
        for w, probs in weights:
            for text, p in probs.items():
                mixed[text] = mixed.get(text, 0.0) + w * p / total
        return total / max(1.0, total), mixed

    def root(self, scales: dict[str, float], number: float = 1.0) -> FunctionRoot:
        weight, probs = self.mixture(scales, number)
        index = {s: k for k, s in enumerate(self.members.strings)}
        kept = {s: p for s, p in probs.items() if s in index}
        total = sum(kept.values())
        log_fun = np.full(len(self.members.strings), -np.inf)
        for text, p in kept.items():
            log_fun[index[text]] = np.log(p / total)
        return FunctionRoot(self.members, weight if total > 0 else 0.0, log_fun)


def site(members: Members, firings) -> Site | None:
    """The root where ``firings`` (:class:`nslm.functions.model.Firing`) fire; None where
    none of their strings can be spelt as a member there."""
    kept = [(f.reference.function, f.confidence, f.probs) for f in firings if f.probs]
    if not kept:
        return None
    local = members.with_strings([text for _, _, probs in kept for text in probs])
    strings = set(local.strings)
    if not any(text in strings for _, _, probs in kept for text in probs):
        return None
    return Site(local, kept)


def documents_of_split(strings: Sequence[str], article_ids: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of each article in a text's corpus tokens."""
    starts = np.flatnonzero(np.r_[True, np.diff(article_ids) != 0])
    ends = np.r_[starts[1:], len(strings)]
    return list(zip(starts.tolist(), ends.tolist(), strict=True))


def text_sites(
    functions: FunctionModel,
    members: Members,
    strings: Sequence[str],
    article_ids: np.ndarray,
    ranges: np.ndarray,
) -> dict[int, Site]:
    """Transformer position → :class:`Site`, for every corpus token of a text where a
    function fires and whose first Transformer token is known (``ranges``: each corpus
    token's Transformer tokens, −1 where not spelt)."""
    out: dict[int, Site] = {}
    for start, end in documents_of_split(strings, article_ids):
        tokens = list(strings[start:end])
        for i in range(1, len(tokens)):
            r = int(ranges[start + i][0])
            if r < 0:
                continue
            firings = functions.firings(tokens, i)
            if not firings:
                continue
            found = site(members, firings)
            if found is not None:
                out[r] = found
    return out


def number_mass(head_log_probs: np.ndarray, class_names: Sequence[str]) -> np.ndarray:
    """P(a number | h) = Σ_{number classes c} P(c | h) for each row of the class head's log
    probabilities (columns: none, then ``class_names[1:]``)."""
    from nslm.data.numbers import NUMBER_CLASSES

    columns = [k for k, name in enumerate(class_names) if k and name in NUMBER_CLASSES]
    if not columns:
        return np.zeros(len(head_log_probs))
    return np.exp(head_log_probs[:, columns]).sum(axis=1)


def roots(
    sites: dict[int, Site], scales: dict[str, float], number: np.ndarray
) -> dict[int, FunctionRoot]:
    """Each site's :class:`FunctionRoot` with the functions' weights λ_f (none: {});
    ``number``: P(a number | h) at every Transformer position (:func:`number_mass`)."""
    if not any(v > 0 for v in scales.values()):
        return {}
    return {r: s.root(scales, float(number[r])) for r, s in sites.items()}


def prompt_site(run, text: str) -> Site | None:
    """Where the word after ``text`` would start: the functions that fire there, as a
    :class:`Site` (None where none fires or the run has no functions). The text is prepared
    as the corpus was, with a placeholder for the next word, as the micro-models read it
    (:func:`nslm.transformer.predict.micro_at_end`)."""
    from nslm.data.text import EOS_TOKENS
    from nslm.transformer.prompts import prepared_slot

    if run.functions is None or not any(run.function_weights.values()) or not text.strip():
        return None
    prepared = prepared_slot(run.corpus, text)
    strings = prepared.strings
    at = max(i for i, t in enumerate(strings) if t not in EOS_TOKENS)
    articles = prepared.split.article_ids
    start = int(np.flatnonzero(articles[: at + 1] == articles[at])[0])
    tokens = list(strings[start : at + 1])
    firings = run.functions.firings(tokens, at - start)
    if not firings:
        return None
    return site(run.members, firings)
