"""Fitted functions: how each writes its result, and how sure it is, learnt from text.

For a function f firing at position i with reference r (``nslm.functions.base``):

    P_f(w | r) = Σ_{keys k of r writing w} P(k | r) / Σ_{keys k of r} P(k | r)

the *writing PDF*, a multinomial over the ways of writing the result, renormalised over the
keys this reference offers. Its counts are of the keys that wrote the training text's
number (a number written by several keys shares its count among them), smoothed along the
reference's conditions, coarse to fine (a Dirichlet prior at each level from the level
before; add-α at the top):

    P_0(k) = (n_0(k) + α) / (n_0 + α |K|),    P_l(k) = (n_l(k) + β P_{l−1}(k)) / (n_l + β)

and, last, the document's own habit: the keys that wrote this function's earlier results of
the same style in the document (``Reference.style``; counts d(k), within
:data:`DOCUMENT_WINDOW` tokens) with the training text's P_L as their prior,

    P_doc(k) = (d(k) + β_doc P_L(k)) / (d + β_doc),

β_doc chosen on valid (a cache over the writing, as the paper's cache model is over words;
none where it does not help there); and

    π_f(context) = σ(b + θ · x(context))

the *confidence*, a logistic regression on the words of the ten tokens before i and the
function's own features, fitted on the training positions where f fires and the text
writes a number, labelled by whether it wrote one of r's strings: π is P(the number is
f's result | a number comes here), as a micro-model is P(w | c) given its class (after
"ended in" a year comes one time in ten, and is a year after the sentence's one time in
two). Demeter & Downey's micro-model (paper Eq. 1) with the previous value replaced by
f(context); the selection on valid (paper, "Micro-Models") chooses the logistic's L2
strength and whether it beats a constant π.

A host model then mixes the functions into its numbers, with π̃ = π / max(1, Σ π):

    P(w | number, h) = Σ_f π̃_f · P_f(w | r_f) + (1 − Σ_f π̃_f) · P_host(w | number, h)

within a number class in the LSTM NSLM (:mod:`nslm.functions.micro`), and over the
Transformer with π scaled by λ_f · P(a number | h) (:mod:`nslm.transformer.sites`).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nslm.data.numbers import is_number
from nslm.errors import NslmError
from nslm.functions.base import Function, Reference, function_names, get_function

ALPHA = 0.5  # add-α on the writing PDF's key counts at the coarsest level
BETA = 5.0  # the Dirichlet prior's weight at each finer level of the conditions
CONTEXT_WORDS = 10  # tokens before the position that the confidence reads
C_GRID = tuple(10.0**k for k in range(-3, 4))  # the logistic's inverse L2 strength
MAX_WIDENINGS = 3
MIN_VALID = 30  # validation positions (with both labels) below which folds of train decide
DOCUMENT_WINDOW = 3000  # tokens back in which a document's earlier writing is read
DOCUMENT_GRID = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)  # β_doc: widened past an edge
FOLDS = 5
VERSION = 2  # 2: π is a share of the numbers written, and the document's habit is read
READABLE = (1, 2)  # a version-1 file (π a share of every position) still reads as it was fitted


def context_features(tokens: Sequence[str], i: int, ref: Reference) -> dict[str, float]:
    """What the confidence reads: the words before ``i`` (numbers as ``<num>``), the
    reference's condition and the function's own features."""
    out = {
        f"w={'<num>' if is_number(t) else t.lower()}": 1.0
        for t in tokens[max(0, i - CONTEXT_WORDS) : i]
    }
    for condition in ref.conditions:
        out[f"condition={condition}"] = 1.0
    out.update({f"f={k}": v for k, v in ref.features.items()})
    return out


@dataclass
class Confidence:
    """π = σ(bias + Σ weight[feature] · value): a logistic regression kept as plain JSON."""

    bias: float
    weights: dict[str, float] = field(default_factory=dict)
    c: float | None = None  # the inverse L2 strength chosen on valid; None: constant π

    def __call__(self, features: dict[str, float]) -> float:
        z = self.bias + sum(self.weights.get(k, 0.0) * v for k, v in features.items())
        return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"bias": self.bias, "weights": self.weights, "c": self.c}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Confidence:
        return cls(
            float(data["bias"]), {k: float(v) for k, v in data["weights"].items()}, data.get("c")
        )


@dataclass
class Firing:
    """A function firing at a position: its reference, its confidence there and its
    distribution over written strings (P_f, summing to one)."""

    reference: Reference
    confidence: float
    probs: dict[str, float]


@dataclass
class Sample:
    """A training or validation position where a function fires."""

    features: dict[str, float]
    right: bool


def documents_positions(
    documents: Sequence[Sequence[str]],
) -> Iterator[tuple[int, Sequence[str], int]]:
    for d, tokens in enumerate(documents):
        for i in range(1, len(tokens)):
            yield d, tokens, i


def code_fingerprint(names: Sequence[str] | None = None) -> str:
    """A hash of the code that fits and applies the functions (each registered function's
    module, this one and the writing rules): a cached fit is kept under it, so a change to
    what a function offers is fitted anew, not read back stale."""
    import hashlib
    import inspect
    import sys

    from nslm.functions import writing

    names = sorted(names or function_names())
    modules = {sys.modules[__name__], writing}
    modules |= {inspect.getmodule(get_function(n)) for n in names}
    digest = hashlib.sha256(" ".join(names).encode())
    for module in sorted(modules, key=lambda m: m.__name__):
        digest.update(inspect.getsource(module).encode())
    return digest.hexdigest()[:16]


class FunctionModel:
    """The functions named, each fitted: its own parameters, its writing PDF and its
    confidence. ``fit`` on training documents, ``choose`` on validation documents."""

    def __init__(self, names: Sequence[str] | None = None) -> None:
        self.functions: dict[str, Function] = {
            n: get_function(n)() for n in names or function_names()
        }
        self.writing: dict[str, dict[str, dict[str, float]]] = {}
        self.confidence: dict[str, Confidence] = {}
        self.selection: dict[str, dict[str, Any]] = {}
        # the forms of what the text wrote where f fired and was not right (``nslm check``)
        self.other_forms: dict[str, dict[str, float]] = {}
        self.check: dict[str, Any] = {}  # nslm check's threshold τ and its evidence
        # β_doc per function (None: the document's writing is not read) and its evidence
        self.document_prior: dict[str, float | None] = {}
        self.document_selection: dict[str, dict[str, Any]] = {}
        self.fitted_on: dict[str, Any] = {}

    # -- what fires ----------------------------------------------------------------------

    def references(self, tokens: Sequence[str], i: int) -> list[Reference]:
        out = []
        for function in self.functions.values():
            ref = function.reference(tokens, i)
            if ref is not None:
                out.append(ref)
        return out

    def writing_probs(
        self, ref: Reference, earlier: Counter | None = None, beta_doc: float | None = None
    ) -> dict[str, float]:
        """P_f(w | r) over the strings r offers (sums to one); ``earlier``: the keys the
        document wrote before (:meth:`earlier_keys`), read with ``beta_doc`` (default: the
        β_doc chosen on valid)."""
        keys = self.key_probs(ref, earlier, beta_doc)
        probs: dict[str, float] = defaultdict(float)
        for option in ref.options:
            probs[option.text] += keys[option.key]
        return dict(probs)

    def key_probs(
        self, ref: Reference, earlier: Counter | None = None, beta_doc: float | None = None
    ) -> dict[str, float]:
        """P(k | r) over the keys r offers (the module docstring's P_doc, or P_L where the
        document has written none of them)."""
        table = self.writing.get(ref.function, {})
        counts, keys = table.get("counts", {}), table.get("keys", [])
        offered = [o.key for o in ref.options]
        size = len(set(keys) | set(offered))
        level = counts.get("", {})
        n = sum(level.values())
        prior = {k: (level.get(k, 0.0) + ALPHA) / (n + ALPHA * size) for k in offered}
        for condition in ref.conditions:
            level = counts.get(condition, {})
            n = sum(level.values())
            prior = {k: (level.get(k, 0.0) + BETA * p) / (n + BETA) for k, p in prior.items()}
        total = sum(prior.values())
        keys = {k: p / total for k, p in prior.items()}
        beta = self.document_prior.get(ref.function) if beta_doc is None else beta_doc
        seen = sum(earlier.get(k, 0.0) for k in keys) if earlier else 0.0
        if beta is None or seen <= 0:
            return keys
        return {k: (earlier.get(k, 0.0) + beta * p) / (seen + beta) for k, p in keys.items()}

    def earlier_keys(self, tokens: Sequence[str], i: int, ref: Reference) -> Counter:
        """The keys that wrote the function's earlier results of ``ref``'s style in the
        document (the :data:`DOCUMENT_WINDOW` tokens before ``i``); empty where ``ref`` has
        no style."""
        out: Counter = Counter()
        if not ref.style:
            return out
        function = self.functions[ref.function]
        for j in range(max(1, i - DOCUMENT_WINDOW), i):
            if not is_number(tokens[j]):
                continue
            before = function.reference(tokens, j)
            if before is None or before.style != ref.style:
                continue
            wrote = [o.key for o in before.options if o.text == tokens[j]]
            for key in wrote:
                out[key] += 1 / len(wrote)
        return out

    def firings(self, tokens: Sequence[str], i: int) -> list[Firing]:
        out = []
        for ref in self.references(tokens, i):
            confidence = self.confidence.get(ref.function)
            pi = confidence(context_features(tokens, i, ref)) if confidence is not None else 0.5
            earlier = (
                self.earlier_keys(tokens, i, ref) if self.document_prior.get(ref.function) else None
            )
            out.append(Firing(ref, pi, self.writing_probs(ref, earlier)))
        return out

    def form_posterior(self, firing: Firing, form: str, following: Sequence[str] = ()) -> float:
        """P(the function's value | the context, a number written in ``form``): Bayes
        between the function (π · P_f(form)) and the other numbers its trigger was followed
        by in training (their forms, add-α); ``following``: the tokens after the number,
        after which the function's own results are written too."""
        function = self.functions[firing.reference.function]
        own = sum(
            p
            for text, p in firing.probs.items()
            if function.form(text, firing.reference, following) == form
        )
        others = self.other_forms.get(firing.reference.function, {})
        n = sum(others.values())
        other = (others.get(form, 0.0) + ALPHA) / (n + ALPHA * (len(others) + 1))
        joint = firing.confidence * own
        rest = (1 - firing.confidence) * other
        return joint / (joint + rest) if joint + rest > 0 else 0.0

    def mixture(self, firings: Sequence[Firing]) -> tuple[float, dict[str, float]]:
        """(the functions' total weight Σ π̃, their mixed distribution over strings, summing to
        one): P(w) = Σ π̃_f P_f(w) / Σ π̃_f, π̃ = π / max(1, Σ π)."""
        total = sum(f.confidence for f in firings)
        if total <= 0:
            return 0.0, {}
        scale = max(1.0, total)
        mixed: dict[str, float] = defaultdict(float)
        for firing in firings:
            for text, p in firing.probs.items():
                mixed[text] += firing.confidence / total * p
        return total / scale, dict(mixed)

    # -- fitting ----------------------------------------------------------------------------

    def fit(
        self, train: Sequence[Sequence[str]], valid: Sequence[Sequence[str]] = ()
    ) -> FunctionModel:
        """Each function's own fit and its writing PDF on ``train``; its confidence fitted on
        ``train`` and chosen on ``valid`` (paper: the {metric, PDF} choice on valid): the
        logistic's C over :data:`C_GRID` (widened past an edge), or a constant π."""
        for function in self.functions.values():
            function.fit(train)
        train_rows = self._samples(train, count_writing=True)
        valid_rows = self._samples(valid, count_writing=False)
        for name, rows in train_rows.items():
            held = valid_rows.get(name, [])
            self.confidence[name], self.selection[name] = choose_confidence(rows, held)
        self._choose_document_priors(valid)
        return self

    def _document_cases(
        self, documents: Sequence[Sequence[str]]
    ) -> dict[str, list[tuple[Reference, Counter, str]]]:
        """Per function: (reference, the document's earlier keys, the string written) where
        it was right and its document had written a result of the same style before."""
        cases: dict[str, list[tuple[Reference, Counter, str]]] = defaultdict(list)
        for _, tokens, i in documents_positions(documents):
            if not is_number(tokens[i]):
                continue
            for ref in self.references(tokens, i):
                if ref.style and tokens[i] in ref.texts():
                    earlier = self.earlier_keys(tokens, i, ref)
                    if earlier:
                        cases[ref.function].append((ref, earlier, tokens[i]))
        return cases

    def _choose_document_priors(self, valid: Sequence[Sequence[str]]) -> None:
        """β_doc per function whose references have a style: the one of
        :data:`DOCUMENT_GRID` (widened past an edge) with the highest mean log P_f of the
        written string at ``valid``'s positions where the function was right and the
        document had written a result of that style before; none where that does not beat
        reading no document, or valid has fewer than :data:`MIN_VALID` such positions."""
        cases = self._document_cases(valid)
        for name in self.functions:
            rows = cases.get(name, [])
            self.document_prior[name] = None
            if len(rows) < MIN_VALID:
                if rows:
                    self.document_selection[name] = {"valid_positions": len(rows), "kept": None}
                continue

            def mean_log(beta: float | None, rows=rows) -> float:
                return float(
                    np.mean(
                        [
                            math.log(self.writing_probs(ref, earlier if beta else None, beta)[text])
                            for ref, earlier, text in rows
                        ]
                    )
                )

            tried = {beta: mean_log(beta) for beta in DOCUMENT_GRID}
            for _ in range(MAX_WIDENINGS):
                best = max(tried, key=tried.get)
                if best not in (min(tried), max(tried)):
                    break
                wider = best / 2 if best == min(tried) else best * 2
                tried[wider] = mean_log(wider)
            best = max(tried, key=tried.get)
            without = mean_log(None)
            kept = best if tried[best] > without else None
            self.document_prior[name] = kept
            self.document_selection[name] = {
                "valid_positions": len(rows),
                "mean_log_p": {f"{b:g}": round(v, 6) for b, v in sorted(tried.items())},
                "mean_log_p_without": round(without, 6),
                "kept": kept,
                "at_grid_edge": kept is not None and kept in (min(tried), max(tried)),
            }

    def _samples(
        self, documents: Sequence[Sequence[str]], count_writing: bool
    ) -> dict[str, list[Sample]]:
        counts: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
        keys: dict[str, set[str]] = defaultdict(set)
        forms: dict[str, Counter] = defaultdict(Counter)
        samples: dict[str, list[Sample]] = defaultdict(list)
        for _, tokens, i in documents_positions(documents):
            if not is_number(tokens[i]):  # π is the function's share of the numbers written
                continue
            for ref in self.references(tokens, i):
                wrote = [o.key for o in ref.options if o.text == tokens[i]]
                samples[ref.function].append(Sample(context_features(tokens, i, ref), bool(wrote)))
                keys[ref.function].update(o.key for o in ref.options)
                for condition in ("", *ref.conditions):
                    for key in wrote:
                        counts[ref.function][condition][key] += 1 / len(wrote)
                if not wrote:
                    function = self.functions[ref.function]
                    forms[ref.function][function.form(tokens[i], ref, tokens[i + 1 :])] += 1
        if count_writing:
            self.other_forms = {name: dict(sorted(n.items())) for name, n in forms.items()}
            self.writing = {
                name: {
                    "keys": sorted(keys[name]),
                    "counts": {c: dict(sorted(n.items())) for c, n in counts[name].items()},
                }
                for name in keys
            }
        return samples

    # -- JSON --------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "fitted_on": self.fitted_on,
            "check": self.check,
            "functions": {
                name: {
                    "params": function.params(),
                    "writing": self.writing.get(name, {}),
                    "confidence": self.confidence[name].to_json()
                    if name in self.confidence
                    else None,
                    "selection": self.selection.get(name, {}),
                    "other_forms": self.other_forms.get(name, {}),
                    "document_prior": self.document_prior.get(name),
                    "document_selection": self.document_selection.get(name, {}),
                }
                for name, function in self.functions.items()
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], source: str = "functions.json") -> FunctionModel:
        if not isinstance(data, dict) or data.get("version") not in READABLE:
            raise NslmError(f"{source}: not a functions file of version {VERSION}")
        try:
            entries = data["functions"]
            model = cls(list(entries))
            model.check = dict(data.get("check", {}))
            model.fitted_on = dict(data.get("fitted_on", {}))
            for name, entry in entries.items():
                model.functions[name].load(entry["params"])
                writing = entry["writing"]
                model.writing[name] = {
                    "keys": [str(k) for k in writing.get("keys", [])],
                    "counts": {
                        str(c): {str(k): float(n) for k, n in level.items()}
                        for c, level in writing.get("counts", {}).items()
                    },
                }
                if entry["confidence"] is not None:
                    model.confidence[name] = Confidence.from_json(entry["confidence"])
                model.selection[name] = dict(entry.get("selection", {}))
                forms = entry.get("other_forms", {})
                model.other_forms[name] = {str(k): float(n) for k, n in forms.items()}
                beta = entry.get("document_prior")
                model.document_prior[name] = None if beta is None else float(beta)
                model.document_selection[name] = dict(entry.get("document_selection", {}))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise NslmError(
                f"{source}: malformed functions file ({type(exc).__name__}: {exc})"
            ) from None
        return model


def _matrix(rows: Sequence[Sample], names: dict[str, int]) -> np.ndarray:
    x = np.zeros((len(rows), len(names)))
    for r, row in enumerate(rows):
        for key, value in row.features.items():
            j = names.get(key)
            if j is not None:
                x[r, j] = value
    return x


def fit_confidence(rows: Sequence[Sample], c: float) -> Confidence:
    """The logistic confidence on ``rows`` at inverse L2 strength ``c`` (scikit-learn's
    L-BFGS; a constant where every row has one label)."""
    from sklearn.linear_model import LogisticRegression

    labels = np.array([r.right for r in rows])
    if labels.all() or not labels.any():
        return constant_confidence(rows)
    names = {k: j for j, k in enumerate(sorted({k for r in rows for k in r.features}))}
    fitted = LogisticRegression(C=c, max_iter=2000).fit(_matrix(rows, names), labels)
    weights = {k: float(fitted.coef_[0, j]) for k, j in names.items() if fitted.coef_[0, j] != 0}
    return Confidence(float(fitted.intercept_[0]), weights, c)


def log_loss(confidence: Confidence, rows: Sequence[Sample]) -> float:
    """Mean negative log-likelihood of the labels, in nats."""
    total = 0.0
    for row in rows:
        p = min(max(confidence(row.features), 1e-12), 1 - 1e-12)
        total -= math.log(p if row.right else 1 - p)
    return total / max(1, len(rows))


def held_out_loss(train: Sequence[Sample], valid: Sequence[Sample], c: float | None) -> float:
    """The log-loss of the confidence fitted at ``c`` (None: a constant) on ``valid``, or, where
    valid cannot tell (fewer than :data:`MIN_VALID` positions, or one label only), its mean
    over :data:`FOLDS` folds of ``train`` in order (each fold held out once)."""
    fit = (
        (lambda rows: constant_confidence(rows))
        if c is None
        else (lambda rows: fit_confidence(rows, c))
    )
    if enough(valid):
        return log_loss(fit(train), valid)
    losses = []
    for k in range(FOLDS):
        held = [row for j, row in enumerate(train) if j % FOLDS == k]
        kept = [row for j, row in enumerate(train) if j % FOLDS != k]
        losses.append(log_loss(fit(kept), held))
    return float(np.mean(losses))


def enough(valid: Sequence[Sample]) -> bool:
    labels = {row.right for row in valid}
    return len(valid) >= MIN_VALID and len(labels) == 2


def constant_confidence(rows: Sequence[Sample]) -> Confidence:
    """π = the rate of right positions in ``rows`` (add-½)."""
    right = sum(row.right for row in rows)
    rate = (right + 0.5) / (len(rows) + 1.0)
    return Confidence(math.log(rate / (1 - rate)), {}, None)


def choose_confidence(
    train: Sequence[Sample], valid: Sequence[Sample]
) -> tuple[Confidence, dict[str, Any]]:
    """The confidence with the lowest held-out log-loss (:func:`held_out_loss`: on valid,
    or by folds of train where valid is too small to tell): the logistic at each C of the
    grid (widened by a decade past an edge it chooses, up to :data:`MAX_WIDENINGS` times)
    or a constant π (the training rate). Returns it and the evidence."""
    grid = list(C_GRID)
    tried: dict[float, float] = {}
    for _ in range(MAX_WIDENINGS + 1):
        for c in grid:
            if c not in tried:
                tried[c] = held_out_loss(train, valid, c)
        best = min(tried, key=tried.get)
        if best not in (min(tried), max(tried)):
            break
        grid = [best / 10] if best == min(tried) else [best * 10]
    at_edge = best in (min(tried), max(tried))
    constant_loss = held_out_loss(train, valid, None)
    evidence = {
        "held_out": "valid" if enough(valid) else f"{FOLDS} folds of train (valid too small)",
        "held_out_log_loss": {f"{c:g}": round(v, 6) for c, v in sorted(tried.items())},
        "constant_held_out_log_loss": round(constant_loss, 6),
        "c": best,
        "c_at_grid_edge": at_edge,
        "train_positions": len(train),
        "valid_positions": len(valid),
        "train_right": sum(row.right for row in train),
    }
    if at_edge:
        evidence["why_at_edge"] = (
            f"the held-out loss still fell at the widened grid's end after {MAX_WIDENINGS} "
            "widenings: the labels are (nearly) separable by the context words"
        )
    if constant_loss <= tried[best]:
        return constant_confidence(train), {**evidence, "kept": "constant"}
    return fit_confidence(train, best), {**evidence, "kept": "logistic"}
