"""Functions over the Transformer: where a function fires, its results are members of that
root, whether or not any class vocabulary holds them (docs/functions.md, "Over the
Transformer").

A function reads the corpus tokens before a word (``nslm.functions``); the word's first
Transformer token is a root of the mixture's walk (:mod:`nslm.transformer.mixture`), and
there the functions' strings join the run's members (:meth:`Members.with_strings`) with
the functions' weight W = Σ π̃ (each π scaled by λ_f) and their distribution P_fun
(:meth:`nslm.functions.FunctionModel.mixture`):

    Q'(w) = (1 − W) · Q(w) + W · P_fun(w),    1 − G' = (1 − W) · (1 − G)

λ_f ∈ [0, 1), one per function, scales its confidence π to this backbone (π' = λ_f · π);
they are fitted on valid after the classes' λ_c (:func:`fit_function_weights`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nslm.data.locate import locate_corpus
from nslm.files.atomic import write_json_atomic
from nslm.files.json_policy import read_json
from nslm.functions.documents import corpus_file_documents
from nslm.functions.model import FunctionModel
from nslm.transformer.candidates import Members
from nslm.transformer.mixture import FunctionRoot

FUNCTIONS_FILE = "functions.json"
WEIGHT_GRID = (0.0, 0.2, 0.35, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98)  # λ_f: W = 1 would leave no mass


@dataclass
class Site:
    """Where functions fire in a text: the root's members (the run's and every string a
    firing function offers) and each firing function's (name, π, P_f over strings)."""

    members: Members
    firings: list[tuple[str, float, dict[str, float]]]

    def mixture(self, scales: dict[str, float]) -> tuple[float, dict[str, float]]:
        """(W, P_fun) with each function's confidence scaled by its λ_f: π' = λ_f · π,
        W = Σ π' / max(1, Σ π'), P_fun = Σ π' P_f / Σ π' (as FunctionModel.mixture)."""
        weights = [(scales.get(name, 0.0) * pi, probs) for name, pi, probs in self.firings]
        total = sum(w for w, _ in weights)
        if total <= 0:
            return 0.0, {}
        mixed: dict[str, float] = {}
        for w, probs in weights:
            for text, p in probs.items():
                mixed[text] = mixed.get(text, 0.0) + w * p / total
        return total / max(1.0, total), mixed

    def root(self, scales: dict[str, float]) -> FunctionRoot:
        weight, probs = self.mixture(scales)
        index = {s: k for k, s in enumerate(self.members.strings)}
        kept = {s: p for s, p in probs.items() if s in index}
        total = sum(kept.values())
        log_fun = np.full(len(self.members.strings), -np.inf)
        for text, p in kept.items():
            log_fun[index[text]] = np.log(p / total)
        return FunctionRoot(self.members, weight if total > 0 else 0.0, log_fun)

    @property
    def weight(self) -> float:
        """Σ π̃ at λ_f = 1 for every function."""
        return self.mixture({name: 1.0 for name, _, _ in self.firings})[0]


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


def roots(sites: dict[int, Site], scales: dict[str, float]) -> dict[int, FunctionRoot]:
    """Each site's :class:`FunctionRoot` with the functions' weights λ_f (none: {})."""
    if not any(v > 0 for v in scales.values()):
        return {}
    return {r: s.root(scales) for r, s in sites.items()}


def fit_functions(corpus: str, classes: str) -> FunctionModel:
    """Every registered function fitted on ``corpus``'s train as written (the Transformer
    reads every word; no ``<unk>``), chosen on its valid."""
    paths = locate_corpus(corpus)
    train = corpus_file_documents(paths["train"], classes)
    valid = corpus_file_documents(paths["valid"], classes)
    model = FunctionModel().fit(train, valid)
    model.fitted_on = {"corpus": corpus, "classes": classes}
    return model


def write_functions(run_dir: Path, model: FunctionModel, weights: dict[str, float]) -> Path:
    path = Path(run_dir) / FUNCTIONS_FILE
    write_json_atomic(path, {**model.to_json(), "transformer_weights": weights})
    return path


def read_functions(run_dir: Path) -> tuple[FunctionModel, dict[str, float]] | None:
    """RUN/functions.json and its λ_f per function, or None where the run has none."""
    path = Path(run_dir) / FUNCTIONS_FILE
    if not path.is_file():
        return None
    data = read_json(path)
    weights = {k: float(v) for k, v in data.get("transformer_weights", {}).items()}
    return FunctionModel.from_json(data, str(path)), weights


def fit_function_weights(parts, lams, rounds: int = 2) -> tuple[dict[str, float], float]:
    """λ_f per function by coordinate search over :data:`WEIGHT_GRID` on the text's total
    log-probability (valid), the classes' weights ``lams`` fixed: (λ_f, total nats).
    ``parts``: a :class:`nslm.transformer.scoring.MixtureParts` made with functions."""
    names = sorted({name for s in parts.sites.values() for name, _, _ in s.firings})
    weights = {name: 0.0 for name in names}
    best = float(parts.score(lams, weights).log_probs.sum())
    for _ in range(rounds):
        moved = False
        for name in names:
            for value in WEIGHT_GRID:
                if value == weights[name]:
                    continue
                trial = {**weights, name: value}
                total = float(parts.score(lams, trial).log_probs.sum())
                if total > best + 1e-9:
                    best, weights, moved = total, trial, True
        if not moved:
            break
    return weights, best


def prompt_site(run, text: str) -> Site | None:
    """Where the word after ``text`` would start: the functions that fire there, as a
    :class:`Site` (None where none fires or the run has no functions). The text is prepared
    as the corpus was, with a placeholder for the next word, as the micro-models read it
    (:func:`nslm.transformer.predict.micro_at_end`)."""
    from nslm.data.text import EOS_TOKENS
    from nslm.transformer.predict import prepared_slot

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


def fit_run_functions(run_dir: Path, progress: bool = True) -> dict:
    """Fit a Transformer run's functions on its corpus and λ_f on the valid prefix it was
    fitted on (its pass read back from RUN/scores); writes RUN/functions.json."""
    from nslm.transformer.commands import corpus_plain, open_transformer_run
    from nslm.transformer.passes import score_text
    from nslm.transformer.scoring import MixtureParts

    run = open_transformer_run(Path(run_dir), functions=False)
    cfg = run.config
    model = fit_functions(cfg["corpus"], str(run.corpus.meta.get("classes_option", "all")))
    valid = score_text(
        run.bundle,
        run.corpus,
        run.members,
        corpus_plain(cfg["corpus"], "valid"),
        "valid",
        cache_dir=run.run_dir / "scores",
        max_tokens=cfg["fit_valid_tokens"],
        progress=progress,
    )
    parts = MixtureParts(
        valid, run.members, run.models, run.head, run.class_names, cache=True, functions=model
    )
    weights, total = fit_function_weights(parts, run.lams)
    write_functions(run.run_dir, model, weights)
    return {
        "weights": weights,
        "weight_grid": list(WEIGHT_GRID),
        "at_grid_edge": sorted(n for n, v in weights.items() if v == WEIGHT_GRID[-1]),
        "valid_log_prob": total,
        "valid_sites": len(parts.sites),
    }
