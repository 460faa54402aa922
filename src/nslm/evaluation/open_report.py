"""The open-vocabulary tables of ``nslm eval`` and of the benchmarks: every token counted.

For each closed table (Numbers, Locations) an open one: the table's classes by rule, its
aggregate and Global, each cell the proper perplexity, Ueberla's adjusted one and the
in-vocabulary one (:mod:`nslm.evaluation.open_tables`), for the NNLM, the NSLM, NSLM-open
and, when the run has context-aware micro-models, NSLM-context and NSLM-context-open. λ of
each ensemble is tuned on the validation aggregate (proper), as the closed tables tune
theirs; without a validation text (``eval --text``) λ is the closed table's. The open
micro-models are the run's own (RUN/open.json): their weights fitted on the training text by
deleted estimation, and the choices made on validation: the L2 weight of a class's gate on
the LM's state (and whether it is kept), ``known_shape``, how the known members share
their mass (:mod:`nslm.micro.open_set`), where the new members' mass comes from, and the
value classes' known-weight shift δ (:func:`choose_known_shift`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from nslm.data.corpus import PreparedCorpus, Split
from nslm.data.fixed_vocab import TextSplit
from nslm.evaluation.open_tables import open_rows, render_open_table, row_masks
from nslm.evaluation.open_vocab import OpenScores, gate_states, open_scores, rescored
from nslm.evaluation.tables import TABLES, table_classes, tables_for
from nslm.micro.open_set import OpenMicroModel
from nslm.micro.unk_share import NEW_MASS, NewMass
from nslm.scores.mixture import tune_lambda
from nslm.scores.passes import Scorer, head_of
from nslm.scores.spelling import SpellingModel

# column → (the micro-models it reads: a key of evaluate_open's ``micro``, open vocabulary)
COLUMNS = {
    "NSLM": ("plain", False),
    "NSLM-open": ("plain", True),
    "NSLM-context": ("context", False),
    "NSLM-context-open": ("context", True),
}


def register_column(column: str, micro: str, is_open: bool = False) -> None:
    """A column more, read from the micro-models ``evaluate_open`` is given as ``micro``
    (a side system's micro-models: nslm.functions registers "NSLM+functions")."""
    COLUMNS[column] = (micro, is_open)


@dataclass
class OpenEvaluation:
    """A run's open scores of each text (``scores[text][micro]``)."""

    scores: dict[str, dict[str, OpenScores]]
    splits: dict[str, Split]
    open_models: dict[str, OpenMicroModel]
    class_names: Sequence[str]
    scorer: Scorer

    def escapes(self, text: str = "valid") -> dict[str, float]:
        """Per open class, the mean probability that its next member is new, over the class's
        tokens of ``text`` (the open micro-model's own answer, no escape parameter)."""
        split = self.splits[text]
        states = gate_states(self.scorer, split, self.open_models)
        out = {}
        for name, om in self.open_models.items():
            positions = np.flatnonzero(split.rule_class_ids == self.class_names.index(name))
            if len(positions):
                ctx = om.cls.context(split, positions, om.micro.context)
                H = states.at(positions) if om.needs_features else None
                out[name] = float(np.exp(om.log_new_mass(ctx, H)).mean())
        return out

    def lambdas(self, row: str, valid: str = "valid") -> dict[str, float]:
        """λ of each column tuned on ``row`` (an aggregate) of the validation text, proper."""
        per = self.scores[valid]
        mask = row_masks(self.splits[valid], self.class_names)[row]
        out = {}
        for column, (micro, is_open) in COLUMNS.items():
            if micro in per:
                s = per[micro]
                out[column] = tune_lambda(s.nnlm(), s.pure(is_open), mask)[0]
        return out

    def columns(self, text: str, lams: dict[str, float], convention: str) -> dict[str, np.ndarray]:
        """Each column's per-position log-probabilities on ``text`` under ``convention``."""
        per = self.scores[text]
        out = {"NNLM": per["plain"].nnlm(convention)}
        for column, (micro, is_open) in COLUMNS.items():
            if micro in per and column in lams:
                out[column] = per[micro].ensemble(lams[column], is_open, convention)
        return out

    def with_new_mass(self, new_mass: NewMass) -> OpenEvaluation:
        """These scores with NSLM-open's new members taking their mass as ``new_mass`` says
        (:class:`nslm.micro.unk_share.NewMass`)."""
        names = self.class_names
        rho = {names.index(c): r for c, r in new_mass.rho.items()}
        scores = {
            text: {m: replace(s, rho=rho or None, new_mass=new_mass.how) for m, s in per.items()}
            for text, per in self.scores.items()
        }
        return replace(self, scores=scores)

    def choose_new_mass(self, rho: dict[str, float]) -> tuple[NewMass, dict[str, Any]]:
        """Each estimator of the new members' mass (:data:`NEW_MASS`) with λ tuned for it on
        valid Numbers; the one with the lowest valid Numbers perplexity (proper) is kept.
        Returns it and, per estimator, λ and each text's Numbers perplexity, proper and
        adjusted."""
        figures: dict[str, Any] = {}
        for how in NEW_MASS:
            variant = self.with_new_mass(NewMass(how, rho))
            lam = variant.lambdas("Numbers")["NSLM-open"]
            figures[how] = {"lambda": lam}
            for text in self.scores:
                row = variant.table(text, {"NSLM-open": lam})["NSLM-open"]["Numbers"]
                figures[how][text] = {k: row[k] for k in ("ppl_proper", "ppl_adjusted")}
        kept = min(NEW_MASS, key=lambda h: figures[h]["valid"]["ppl_proper"])
        return NewMass(kept, rho), figures

    def table(self, text: str, lams: dict[str, float]) -> dict[str, dict[str, Any]]:
        """``{column: {row: {ppl_proper, ppl_adjusted, ppl_in_vocab, tokens, oov_tokens}}}``."""
        split, oov = self.splits[text], self.scores[text]["plain"].oov
        proper = self.columns(text, lams, "proper")
        adjusted = self.columns(text, lams, "adjusted")
        return {c: open_rows(proper[c], adjusted[c], split, self.class_names, oov) for c in proper}


def evaluate_open(
    scorer: Scorer,
    micro: dict[str, dict],
    open_models: dict[str, OpenMicroModel],
    spelling: SpellingModel,
    texts: dict[str, TextSplit],
    class_names: Sequence[str],
) -> OpenEvaluation:
    """Score every text with each set of micro-models (``{"plain": …, "context": …}``)."""
    scores = {
        name: {
            m: open_scores(scorer, t, mm, open_models, spelling, class_names)
            for m, mm in micro.items()
        }
        for name, t in texts.items()
    }
    splits = {name: t.split for name, t in texts.items()}
    return OpenEvaluation(scores, splits, open_models, class_names, scorer)


def open_tables(
    scorer: Scorer,
    micro: dict,
    open_models: dict[str, OpenMicroModel],
    spelling: SpellingModel,
    texts: dict[str, TextSplit],
    corpus: PreparedCorpus,
    closed: dict[str, Any],
    new_mass: NewMass | None = None,
) -> dict[str, Any]:
    """``nslm eval``'s open-vocabulary tables beside the closed ones of ``closed`` (what
    :func:`nslm.evaluation.report.evaluate_run` returned): one per closed table, its rows
    counted by rule, λ tuned on the validation aggregate when ``texts`` has ``"valid"``,
    else the closed table's; ``texts`` cut to the closed tables' ``max_tokens``; NSLM-open's
    new members take their mass as the run's ``new_mass`` says (default: the escape)."""
    new_mass = new_mass or NewMass()
    split = closed["split"]
    texts = {n: _head(t, closed["max_tokens"]) for n, t in texts.items() if n in (split, "valid")}
    saved = {table: entry["lambda"] for table, entry in closed["tables"].items()}
    evaluation = evaluate_open(
        scorer, {"plain": micro}, open_models, spelling, texts, corpus.class_names
    ).with_new_mass(new_mass)
    escapes = evaluation.escapes("valid" if "valid" in texts else split)
    out: dict[str, Any] = {
        "new_member_probability": escapes,
        "new_mass": new_mass.to_json(),
        "tables": {},
    }
    for table in tables_for(corpus):
        aggregate = TABLES[table][1] or "Global"
        if "valid" in texts:
            lams = evaluation.lambdas(aggregate)
        else:
            lams = {"NSLM": saved[table], "NSLM-open": saved[table]}
        rows = [*table_classes(corpus, table), aggregate, "Global"]
        rows = list(dict.fromkeys(rows))  # a user table's aggregate is Global
        columns = evaluation.table(split, lams)
        out["tables"][table] = {
            "lambdas": lams,
            "rows": rows,
            "columns": {c: {r: v[r] for r in rows} for c, v in columns.items()},
        }
    return out


def _head(text: TextSplit, max_tokens: int) -> TextSplit:
    """A prepared text's first ``max_tokens`` tokens (0 = all), strings with them."""
    if max_tokens <= 0:
        return text
    return replace(text, split=head_of(text.split, max_tokens), strings=text.strings[:max_tokens])


def render_open(result: dict[str, Any]) -> str:
    """The open-vocabulary tables of :func:`open_tables` as text."""
    blocks = []
    news = ", ".join(f"{n} {b:.2g}" for n, b in result["new_member_probability"].items())
    for table, entry in result["tables"].items():
        title = f"{TABLES[table][0]}, open vocabulary: every token counted by its rule class"
        lams = ", ".join(f"{c} λ={v:.2f}" for c, v in entry["lambdas"].items())
        text = render_open_table(entry["columns"], entry["rows"], title)
        how = result.get("new_mass", {}).get("kept", "escape")
        blocks.append(
            f"{text}\n{lams}; P(new member | class), mean: {news}; new members' mass: {how}"
        )
    return "\n\n".join(blocks)


SHIFT_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)  # δ: widened past an edge
SHIFT_WIDENINGS = 3


def value_classes(models: dict[str, OpenMicroModel]) -> list[str]:
    """The unbounded number classes: those whose base is a value model (every spelling)."""
    from nslm.micro.open_values import ValueBase

    return [n for n, om in models.items() if isinstance(om.base, ValueBase)]


def with_known_shift(models: dict[str, OpenMicroModel], shift: float) -> dict:
    """The open micro-models with the value classes' known weight shifted by δ = ``shift``
    (:class:`nslm.micro.open_set.KnownWeight`); the others as they are."""
    import copy

    out = dict(models)
    for name in value_classes(models):
        om = copy.copy(models[name])
        om.weight = replace(om.weight, shift=shift)
        out[name] = om
    return out


def choose_known_shift(
    scorer: Scorer,
    valid: TextSplit,
    micro: dict,
    models: dict[str, OpenMicroModel],
    spelling: SpellingModel,
    class_names: Sequence[str],
    new_mass: NewMass,
) -> tuple[float, dict[str, Any]]:
    """δ, the value classes' known-weight shift (:class:`nslm.micro.open_set.KnownWeight`),
    chosen on ``valid``: each δ of :data:`SHIFT_GRID` (widened past an edge) with λ tuned
    for it, the one whose NSLM-open Numbers perplexity (proper) is lowest. The deleted
    estimation's halves each know the members of half the training articles, so they meet
    more new members than a text after the whole training set: the shift the validation
    text asks for says by how much. Returns δ and the evidence."""
    tried: dict[float, dict[str, float]] = {}
    names = value_classes(models)
    if not names:
        return 0.0, {"classes": [], "kept": 0.0, "at_grid_edge": False}
    base = open_scores(scorer, valid, micro, models, spelling, class_names)  # the LM read once

    def score(shift: float) -> None:
        shifted = with_known_shift(models, shift)
        moved = rescored(base, valid, models, {n: shifted[n] for n in names}, class_names)
        evaluation = OpenEvaluation(
            {"valid": {"plain": moved}}, {"valid": valid.split}, shifted, class_names, scorer
        ).with_new_mass(new_mass)
        lam = evaluation.lambdas("Numbers")["NSLM-open"]
        row = evaluation.table("valid", {"NSLM-open": lam})["NSLM-open"]["Numbers"]
        tried[shift] = {"lambda": lam, "ppl_proper": row["ppl_proper"]}

    for shift in SHIFT_GRID:
        score(shift)
    for _ in range(SHIFT_WIDENINGS):
        best = min(tried, key=lambda d: tried[d]["ppl_proper"])
        if best not in (min(tried), max(tried)):
            break
        score(best * 2 if best == max(tried) else best - 1.0)
    best = min(tried, key=lambda d: tried[d]["ppl_proper"])
    return best, {
        "classes": names,
        "valid_numbers": {f"{d:g}": v for d, v in sorted(tried.items())},
        "kept": best,
        "at_grid_edge": best in (min(tried), max(tried)),
    }


def fit_run_new_mass(
    loaded: Any, micro: dict, models: dict[str, OpenMicroModel]
) -> tuple[NewMass, dict]:
    """Where NSLM-open's new members take their mass from, chosen on the run's valid split
    (:meth:`OpenEvaluation.choose_new_mass`): ρ_c fitted on the
    training halves (:func:`nslm.micro.unk_share.fit_unk_shares`), then the escape, ρ_c of
    P(<unk> | h), or both, whichever gives valid's Numbers the lowest perplexity; then, with
    that estimator, the value classes' known-weight shift δ (:func:`choose_known_shift`),
    set on ``models``. Returns the estimator and the evidence (each estimator's λ and valid
    Numbers perplexity; each δ's)."""
    from nslm.data.fixed_vocab import prepare_text_file
    from nslm.data.locate import locate_corpus
    from nslm.micro.unk_share import fit_unk_shares
    from nslm.scores.spelling import fit_spelling

    corpus = loaded.corpus
    names = list(corpus.class_names)
    closed = [n for n, om in models.items() if not om.has_new_members]
    shares = fit_unk_shares(corpus.train, names, list(models), closed)
    paths = locate_corpus(loaded.cfg.corpus, download=False)
    valid = prepare_text_file(corpus, paths["valid"], "valid", "tokenized")
    scorer, spelling = loaded.scorer(), fit_spelling(corpus)
    evaluation = evaluate_open(scorer, {"plain": micro}, models, spelling, {"valid": valid}, names)
    kept, figures = evaluation.choose_new_mass(shares["rho"])
    shift, evidence = choose_known_shift(scorer, valid, micro, models, spelling, names, kept)
    models.update(with_known_shift(models, shift))
    return kept, {"estimators": figures, "fitted_on": shares, "known_shift": evidence}
