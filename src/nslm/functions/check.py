"""``nslm check``: flag the numbers of a text that disagree with what a function computes.

At each number where a function fires (``nslm.functions``), the number is *consistent*
when it states one of the results the function agrees with (by default those it gives 2%
of its mass; a conversion adds every unit's result at the input's precision) at the
precision it is written in (``193`` for 193.12 km, ``190`` too: half its last place), or,
for a function with a tolerance (a conversion: 2%), within that share of it. An
inconsistent number is flagged when the function's reading of it is likely enough: given
the context and the number's *form* (its digits before and after the point),

    P(f | context, form) = π P_f(form) / (π P_f(form) + (1 − π) P_other(form))

π the function's confidence there (it reads the context: a "1914 – 18" in a sentence
about a war is less likely a season), P_f(form) the share of its results written in that
form, P_other(form) how often its trigger was followed by a number of that form in
training where it was not right (after "1962 –", four digits are most often the end of a
span: "1962 – 1968" is not a wrong season). ``ratio`` is that posterior's odds: how much
likelier it is that the number was meant to be the computed one. A number is flagged at
ratio ≥ τ, τ chosen on WikiText-2 valid (:func:`choose_threshold`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from nslm.data.numbers import is_number, number_value
from nslm.functions.base import LIKELY
from nslm.functions.model import Firing, FunctionModel
from nslm.functions.writing import written

DEFAULT_THRESHOLD = 3.0


@dataclass(frozen=True)
class Flag:
    """A number that disagrees with a function: where, what it says, what was expected."""

    document: int
    position: int
    written: str
    expected: str
    function: str
    ratio: float  # how much likelier the expected value is than the written one
    detail: str  # the computation, in words
    context: str  # the tokens before it

    def to_json(self) -> dict:
        out = asdict(self)
        out["ratio"] = round(self.ratio, 3) if math.isfinite(self.ratio) else None
        return out


def consistent(written: str, expected: Sequence[float], relative: float = 0.0) -> bool:
    """Whether ``written`` states one of the ``expected`` values at its own precision (half
    its last written place; an integer's trailing zeros are placeholders, so ``20`` states
    24.1 at one figure) or within ``relative`` of it."""
    value = number_value(written)
    whole, _, fraction = written.replace(",", "").partition(".")
    places = -len(fraction) if fraction else len(whole) - len(whole.rstrip("0"))
    tolerance = 0.5 * 10.0**places
    return any(abs(value - target) <= max(tolerance, relative * abs(target)) for target in expected)


def check_position(
    model: FunctionModel,
    tokens: Sequence[str],
    i: int,
    written: str | None = None,
    firings: Sequence[Firing] | None = None,
) -> Flag | None:
    """The flag at ``tokens[i]`` (or at ``written`` put there instead) of document 0, with
    its ratio, unless it agrees with the functions that fire there or none does; the caller
    compares the ratio with τ. ``firings``: the functions' firings at ``i``, if known."""
    text = tokens[i] if written is None else written
    if not is_number(text):
        return None
    firings = checked_firings(model, tokens, i) if firings is None else firings
    relative = max(model.functions[f.reference.function].tolerance for f in firings)
    agreeing = [
        value
        for f in firings
        for value in model.functions[f.reference.function].agreeing(f.reference, f.probs)
    ]
    likely = {t for f in firings for t, p in f.probs.items() if p >= LIKELY}
    if text in likely or consistent(text, agreeing, relative):
        return None
    following = tokens[i + 1 :]
    forms = [
        model.functions[f.reference.function].form(text, f.reference, following) for f in firings
    ]
    posteriors = [
        model.form_posterior(f, form, following) for f, form in zip(firings, forms, strict=True)
    ]
    best = int(np.argmax(posteriors))
    leading, posterior, form = firings[best], posteriors[best], forms[best]
    ratio = posterior / (1 - posterior) if posterior < 1 else math.inf
    function = model.functions[leading.reference.function]
    same_form = {
        t: p
        for t, p in leading.probs.items()
        if function.form(t, leading.reference, following) == form
    }
    expected = max(same_form or leading.probs, key=(same_form or leading.probs).get)
    context = " ".join(tokens[max(0, i - 8) : i])
    reference = leading.reference
    return Flag(0, i, text, expected, reference.function, ratio, reference.detail, context)


def check_documents(
    model: FunctionModel, documents: Sequence[Sequence[str]], threshold: float
) -> tuple[list[Flag], int]:
    """The flags of ``documents`` at ratio ≥ ``threshold``, and how many of their numbers a
    function fired at (the numbers checked)."""
    flags, checked = [], 0
    for d, tokens, i, firings in fired_numbers(model, documents):
        checked += 1
        flag = check_position(model, tokens, i, firings=firings)
        if flag is not None and flag.ratio >= threshold:
            flags.append(replace(flag, document=d))
    return flags, checked


def fired_numbers(
    model: FunctionModel, documents: Sequence[Sequence[str]]
) -> Iterator[tuple[int, Sequence[str], int, list[Firing]]]:
    """(document, its tokens, position, the firings there) at every number a function fires
    at: the numbers ``nslm check`` checks."""
    for d, tokens in enumerate(documents):
        for i in range(1, len(tokens)):
            if is_number(tokens[i]):
                firings = checked_firings(model, tokens, i)
                if firings:
                    yield d, tokens, i, firings


def checked_firings(model: FunctionModel, tokens: Sequence[str], i: int) -> list[Firing]:
    """The firings at ``i`` of the functions ``nslm check`` judges by (``Function.checked``)."""
    return [f for f in model.firings(tokens, i) if model.functions[f.reference.function].checked]


def corrupt(gold: str, function: str, rng: np.random.Generator) -> str:
    """A plausible wrong value in place of ``gold``, a number a function computed (the
    benchmark's corruption): a season a few years on, an age or a year a few off, a
    conversion 10–50% off at the written precision."""
    value = number_value(gold)
    _, _, fraction = gold.replace(",", "").partition(".")
    for _ in range(100):
        if function == "season" and len(gold) == 2:
            text = f"{(int(value) + int(rng.integers(2, 6))) % 100:02d}"
        elif function in ("season", "age", "years_later") or (value < 10 and not fraction):
            text = str(int(value) + int(rng.choice([-1, 1]) * rng.integers(2, 7)))
        else:
            factor = rng.uniform(0.6, 0.9) if rng.random() < 0.5 else rng.uniform(1.12, 1.5)
            text = written(value * factor, len(fraction))
        relative = 0.05 if function == "convert" else 0.0
        if is_number(text) and not consistent(text, [value], relative):
            return text
    raise ValueError(f"no corruption found for {gold!r}")


def choose_threshold(
    model: FunctionModel, documents: Sequence[Sequence[str]], max_false: float, seed: int = 0
) -> dict:
    """τ from a grid of powers of ten (and halves): the smallest with a false-flag rate ≤
    ``max_false`` on the untouched numbers of ``documents`` (validation text), with the
    recall of corrupted values at each τ as evidence."""
    ratios_true, ratios_false = true_and_corrupt_ratios(model, documents, seed)
    grid = [10.0 ** (k / 4) for k in range(-8, 13)]
    table = {}
    for tau in grid:
        false = sum(r >= tau for r in ratios_true) / max(1, len(ratios_true))
        recall = sum(r >= tau for r in ratios_false) / max(1, len(ratios_false))
        table[f"{tau:.4g}"] = {"false_flags": round(false, 4), "recall": round(recall, 4)}
    allowed = [tau for tau in grid if table[f"{tau:.4g}"]["false_flags"] <= max_false]
    tau = min(allowed) if allowed else grid[-1]
    return {"threshold": tau, "at_grid_edge": tau in (grid[0], grid[-1]), "grid": table}


def true_and_corrupt_ratios(
    model: FunctionModel, documents: Sequence[Sequence[str]], seed: int = 0
) -> tuple[list[float], list[float]]:
    """The ratio of every untouched number a function fires at (0 where it agrees), and of a
    corrupted value at each number a function computed right."""
    rng = np.random.default_rng(seed)
    untouched, corrupted = [], []
    for _, tokens, i, firings in fired_numbers(model, documents):
        flag = check_position(model, tokens, i, firings=firings)
        untouched.append(0.0 if flag is None else flag.ratio)
        right = [f for f in firings if tokens[i] in f.probs]
        if right:
            wrong = corrupt(tokens[i], right[0].reference.function, rng)
            flag = check_position(model, tokens, i, wrong, firings)
            corrupted.append(0.0 if flag is None else flag.ratio)
    return untouched, corrupted
