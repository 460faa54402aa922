"""``nslm report RUN``: one self-contained HTML page of everything a run directory holds.

The report reads the run's files only (no corpus, no model): ``config.json``,
``metrics.jsonl`` (training curves), ``results.json``, and whatever later commands left there:
``tables_<split>.json`` (``nslm eval``: the paper's Tables 2 and 3, shown beside the paper's
WikiText-2 figures), ``micro.json`` (the selected micro-model per class and its grid-search
cells) with ``plots/`` (``nslm micro plot``: the fitted PDFs, paper Figure 2),
``rarity_<split>.json`` (perplexity by training count, Figure 3), ``probes/`` (a byte LM's
neuron probes). Each section appears when its file is there; the page says which commands
add the missing ones.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from nslm.errors import NslmError
from nslm.files.atomic import write_bytes_atomic
from nslm.files.json_policy import read_json
from nslm.pages import sections
from nslm.pages.html import esc, figure, matplotlib_png, number, page, table
from nslm.pages.transformer_report import transformer_sections

Section = tuple[str, str, str]


def read_metrics(path: Path) -> list[dict]:
    """The lines of ``metrics.jsonl`` that parse (a killed run may have cut its last line)."""
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def run_kind(cfg: dict) -> str:
    if cfg.get("kind") == "transformer":
        return "Transformer + micro-models"
    if cfg.get("model") == "word-pos":
        return "word+POS LM"
    corpus = str(cfg.get("corpus", ""))
    if corpus == "imdb-bytes" or corpus.startswith("bytes:"):
        return "byte LM"
    return "word LM"


def overview(run: Path, cfg: dict, results: dict) -> Section:
    kind = run_kind(cfg)
    facts = [
        ("run", str(run)),
        ("kind", kind),
        ("corpus", cfg.get("corpus", "?")),
        ("model", f"{cfg.get('model')} {cfg.get('num_layers')}×{cfg.get('hidden_size')}"),
        ("heads", ", ".join(cfg.get("heads", []))),
    ]
    for key in ("train_minutes", "train_tokens", "train_tokens_per_s", "steps", "epochs"):
        if key in results:
            facts.append((key, number(results[key])))
    body = table(["fact", "value"], facts, sortable=False)
    figures = {k: v for k, v in results.items() if k.startswith(("valid_", "test_"))}
    if figures:
        rows = [(k, number(v, 4 if abs(v or 0) < 10 else 1)) for k, v in figures.items()]
        body += "<h3>Final figures (results.json)</h3>" + table(["figure", "value"], rows)
    else:
        body += '<p class="note">No results.json yet: the run has not finished.</p>'
    return "overview", "Overview", body


def config_section(cfg: dict) -> Section:
    rows = [(k, json.dumps(v) if isinstance(v, list | dict) else v) for k, v in cfg.items()]
    return "config", "Config", table(["key", "value"], rows)


def curves_figure(records: list[dict], byte_lm: bool) -> bytes | None:
    """Training losses and validation perplexity (bits per byte for a byte LM) against steps."""
    train = [r for r in records if "event" not in r and "step" in r]
    valid = [r for r in records if r.get("event") == "valid"]
    if not train and not valid:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    for key in sorted({k for r in train for k in r if k.startswith("loss_")}):
        points = [(r["step"], r[key]) for r in train if key in r]
        left.plot(*zip(*points, strict=True), label=key[5:])
    left.set(xlabel="step", ylabel="training loss (nats/token)", title="training")
    for key in sorted({k for r in valid for k in r if k.startswith("valid_ppl_")}):
        points = [(r["step"], r[key]) for r in valid if r.get(key) is not None]
        if byte_lm:
            points = [(s, math.log2(p)) for s, p in points]
        right.plot(*zip(*points, strict=True), marker="o", label=key[10:])
    right.set(
        xlabel="step", title="validation", ylabel="bits per byte" if byte_lm else "perplexity"
    )
    for ax in (left, right):
        if ax.lines:
            ax.legend()
        ax.grid(alpha=0.3)
    return matplotlib_png(fig)


def training_section(run: Path, cfg: dict) -> Section | None:
    records = read_metrics(run / "metrics.jsonl")
    if not records:
        return None
    byte_lm = run_kind(cfg) == "byte LM"
    png = curves_figure(records, byte_lm)
    body = figure(png, "training loss per head; validation at each check") if png else ""
    valid = [r for r in records if r.get("event") == "valid"]
    keys = sorted({k for r in valid for k in r if k.startswith("valid_")})
    rows = [
        [r.get("epoch"), r.get("step"), number(r.get("lr"), 5)]
        + [number(r.get(k), 3 if byte_lm else 1) for k in keys]
        for r in valid
    ]
    if rows:
        body += table(["epoch", "step", "lr", *keys], rows, raw=False)
    return "training", "Training", body


def build_report(run: Path | str) -> str:
    """The report's HTML for the run directory ``run``."""
    run = Path(run)
    if not (run / "config.json").is_file():
        raise NslmError(f"{run} is not a run directory (no config.json)")
    cfg = read_json(run / "config.json")
    if cfg.get("kind") == "transformer":  # no training here: a frozen backbone, fitted parts
        parts: list[Section | None] = [*transformer_sections(run, cfg)]
        parts += [sections.micro_models(run, plot_hint=False), config_section(cfg)]
        hints = []
    else:
        results = read_json(run / "results.json") if (run / "results.json").is_file() else {}
        parts = [overview(run, cfg, results), training_section(run, cfg)]
        parts += sections.paper_tables(run)
        parts += [sections.micro_models(run), sections.context_models(run), sections.rarity(run)]
        parts += sections.probes(run)
        parts.append(sections.interventions(run))
        parts.append(config_section(cfg))
        hints = sections.missing_hints(run, cfg)
    present = [p for p in parts if p is not None]
    subtitle = esc(f"{run_kind(cfg)} · {cfg.get('corpus', '')}")
    if hints:
        subtitle += "<br>" + " ".join(hints)
    return page(f"nslm report: {run.name}", present, subtitle)


def write_report(run: Path | str, out: Path | str | None = None) -> Path:
    """Write the report (``RUN/report.html`` by default) atomically; return its path."""
    run = Path(run)
    path = Path(out) if out is not None else run / "report.html"
    write_bytes_atomic(path, build_report(run).encode("utf-8"))
    return path
