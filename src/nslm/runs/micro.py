"""The micro-models of a training run: ``RUN/micro.json``, fitted on the run's own corpus.

``nslm micro fit RUN`` runs the exhaustive {metric, PDF} grid search of paper Table 1, step 4
(:mod:`nslm.micro.selection`) for every class the run's HNLM predicts a tag for, on the
corpus the run was trained on (same ``classes`` and ``class_rules``, hence the same
vocabulary), and writes the selections, every grid cell and every fitted parameter next to
the weights. The NSLM (Eq. 4) then multiplies the HNLM's P(c | h) by these P_MM (for a run
without an HNLM head, the single-task P(c | h) of :mod:`nslm.scores.classes`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from nslm.errors import NslmError
from nslm.micro.model import MicroModel
from nslm.micro.pdfs import pdf_names
from nslm.micro.pipeline import fit_micro
from nslm.micro.plugins import load_class_file, load_plugin
from nslm.micro.store import load_micro_models, read_micro_json, write_micro_json
from nslm.runs.load import LoadedRun

MICRO_FILE = "micro.json"
# --fast drops the mixture of Gaussians: its EM is ~90% of the full grid's time (5 min → 30 s
# for all ten WikiText-2 classes, measured). On WikiText-2 validation only <country> selects
# a MoG in the full grid, 0.7% below the multinomial (docs/nslm.md).
SLOW_PDFS = ("mog",)


def run_classes(loaded: LoadedRun, wanted: list[str] | None = None) -> list[str]:
    """The classes the run's HNLM has a tag for (the ones Eq. 4 can fire a micro-model on).

    ``wanted`` (default: every class of the run's corpus) must all be such classes: an
    unknown name, or a class whose vocabulary is empty (no training type matched its rule,
    so the LM never learnt its tag), is a one-line error.
    """
    corpus = loaded.corpus
    # The HNLM's tags, or for an NNLM-only run the single-task NSLM's V_c (paper Table 8).
    tagged = loaded.classes.tagged
    names = list(corpus.class_names[1:])
    for name in names if wanted is None else wanted:
        if name not in names:
            raise NslmError(f"unknown class <{name}>; this run has: {', '.join(names)}")
        if not tagged[corpus.class_names.index(name)]:
            raise NslmError(
                f"class <{name}> has an empty vocabulary in {loaded.run_dir}'s corpus "
                "(no training type matches it); fix or drop its rule, or use --only"
            )
    return [n for n in names if wanted is None or n in wanted]


def fit_run_micro(
    loaded: LoadedRun,
    *,
    only: list[str] | None = None,
    fast: bool = False,
    metrics: list[str] | None = None,
    pdfs: list[str] | None = None,
    plugins: tuple[str, ...] = (),
    class_file: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Grid-search every class of the run (or ``only`` these) and return micro.json's payload.

    ``class_file`` (the ``nslm micro fit --class-file`` TOML) may limit the metrics and PDFs
    of the run's classes and load plug-ins; it cannot add a class the LM was not trained to
    predict a tag for (that is ``class_rules`` in the training config).
    """
    corpus = loaded.corpus
    names = run_classes(loaded, only)
    plugin_specs = [str(Path(p).resolve()) if p.endswith(".py") else p for p in plugins]
    for spec in plugin_specs:
        load_plugin(spec)
    limits: dict[str, tuple[list[str] | None, list[str] | None]] = {}
    if class_file is not None:
        for user in load_class_file(class_file):
            if user.name not in names:
                raise NslmError(
                    f"class <{user.name}> of {class_file} is not tagged in this run; add "
                    f'class_rules = ["{user.name}=REGEX"] to the training config'
                )
            limits[user.name] = (user.metrics, user.pdfs)
            plugin_specs += [p for p in user.plugins if p not in plugin_specs]
    if fast and pdfs is None:
        pdfs = [p for p in pdf_names() if p not in SLOW_PDFS]
    payload: dict[str, Any] | None = None
    # One fit_micro call per distinct (metrics, pdfs) limit, merged into one payload.
    groups: dict[tuple, list[str]] = {}
    for name in names:
        m, p = limits.get(name, (None, None))
        key = (tuple(m or metrics or ()), tuple(p or pdfs or ()))
        groups.setdefault(key, []).append(name)
    for (m, p), group in groups.items():
        _, part = fit_micro(
            corpus, names=group, metrics=list(m) or None, pdfs=list(p) or None, progress=progress
        )
        if payload is None:
            payload = part
        else:
            payload["classes"].update(part["classes"])
    assert payload is not None
    payload["classes"] = {n: payload["classes"][n] for n in names}  # the corpus's order
    payload["run"] = str(loaded.run_dir)
    payload["grid"] = "fast" if fast else "full"
    payload["plugins"] = plugin_specs
    return payload


def write_run_micro(loaded: LoadedRun, payload: dict[str, Any], out: Path | None = None) -> Path:
    return write_micro_json(out or Path(loaded.run_dir) / MICRO_FILE, payload)


def load_run_micro(loaded: LoadedRun, path: Path | None = None) -> dict[str, MicroModel]:
    """The fitted micro-models of a run, checked against its vocabulary and its HNLM tags."""
    path = Path(path) if path is not None else Path(loaded.run_dir) / MICRO_FILE
    if not path.is_file():
        raise NslmError(f"no {path}: run 'nslm micro fit {loaded.run_dir}' first")
    payload = read_micro_json(path)
    for spec in payload.get("plugins", []):
        load_plugin(spec)  # plug-in metrics/PDFs must be registered before the models load
    models = load_micro_models(path, loaded.corpus)
    run_classes(loaded, list(models))  # each must be a tagged class of this run
    return models


def selected_summary(models: dict[str, MicroModel]) -> dict[str, dict[str, str]]:
    """{class: {metric, pdf, context}} for the tables' Metric/PDF columns."""
    return {
        n: {"metric": m.metric.name, "pdf": m.pdf.name, "context": m.context}
        for n, m in models.items()
    }
