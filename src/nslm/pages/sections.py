"""The report's sections that later commands add to a run: Tables 2/3 beside the paper's,
micro-models with their grid cells and fitted PDFs, perplexity by rarity, neuron probes.

Each takes the run directory and returns ``(anchor, heading, HTML)``, or
None (a list for the ones that repeat per split or per probe) when the run lacks the file.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from nslm.evaluation.tables import fmt_change
from nslm.files.json_policy import read_json
from nslm.micro.store import read_micro_json
from nslm.pages.html import esc, figure, number, table
from nslm.pages.paper import PAPER_MODELS, paper_row

Section = tuple[str, str, str]


def _paper_cells(table_name: str, row: str) -> list[str]:
    paper = paper_row(table_name, row)
    if paper is None:
        return ["", ""]
    nnlm, nslm = paper["ppl"][PAPER_MODELS.index("NNLM")], paper["ppl"][PAPER_MODELS.index("NSLM")]
    return [
        f'<span class="paper">{number(nnlm)}</span>',
        f'<span class="paper">{number(nslm)}</span> <span class="muted">×{nslm / nnlm:.2f}</span>',
    ]


def _one_table(name: str, data: dict) -> str:
    models = data["models"]
    classes = data["classes"]
    headers = [
        "class",
        "metric",
        "PDF",
        "tokens",
        *models,
        "NSLM ÷ NNLM",
        "paper NNLM",
        "paper NSLM",
    ]
    rows, css = [], []
    for row in [*classes, *data["aggregates"]]:
        ppl = data["rows"].get(row, {})
        chosen = classes.get(row, {})
        ratio = ppl.get("NSLM", 0) / ppl["NNLM"] if ppl.get("NNLM") else None
        label = f"&lt;{esc(row)}&gt;" if row in classes else esc(row)
        cells = [
            label,
            esc(chosen.get("metric", "")),
            esc(chosen.get("pdf", "")),
            number(data["tokens"].get(row)),
        ]
        for model in models:
            value = number(ppl.get(model))
            change = data.get("change", {}).get(row, {}).get(model)
            change = fmt_change(math.nan if change is None else change)
            cells.append(f'{value} <span class="muted">{change}</span>')
        cells.append(f"×{ratio:.2f}" if ratio else "")
        cells += _paper_cells(name, row)
        rows.append(cells)
        css.append("aggregate" if row not in classes else "")
    note = (
        f"<p class='note'>{esc(data.get('title', name))} ({esc(data.get('split', ''))}); "
        f"NSLM = λ·NNLM + (1 − λ)·NSLM-pure with λ = {number(data.get('lambda'), 2)} tuned on "
        "valid. Paper: Demeter &amp; Downey, WikiText-2 columns; the paper's selected metric "
        "and PDF may differ from the run's. % change against the NNLM: (x%) is a reduction.</p>"
    )
    return note + table(headers, rows, classes=css, raw=True)


def paper_tables(run: Path) -> list[Section]:
    """Tables 2 and 3 of every ``tables_<split>.json`` that ``nslm eval`` wrote."""
    out = []
    for path in sorted(run.glob("tables_*.json")):
        data = read_json(path)
        split = path.stem.removeprefix("tables_")
        body = "".join(
            f"<h3>{esc(t.get('title', name))}</h3>" + _one_table(name, t)
            for name, t in data.get("tables", {}).items()
        )
        out.append((f"tables-{split}", f"Tables 2 and 3 ({split})", body))
    return out


def _fitted_summary(pdf: dict) -> str:
    """A short line of a fitted PDF's parameters (the full ones are in micro.json)."""
    parts = []
    for key, value in pdf.get("fitted", {}).items():
        if isinstance(value, list):
            parts.append(f"{key}: {len(value)} values")
        else:
            parts.append(f"{key}: {number(value, 4) if isinstance(value, float) else esc(value)}")
    hyper = ", ".join(f"{k}={v}" for k, v in pdf.get("hyper", {}).items())
    return esc(hyper) + ("; " if hyper and parts else "") + "; ".join(parts)


def micro_models(run: Path, plot_hint: bool = True) -> Section | None:
    """The selected micro-model per class, its grid-search cells and its PDF figure (and,
    with ``plot_hint``, the command that draws the figures where the run has none)."""
    path = run / "micro.json"
    if not path.is_file():
        return None
    micro = read_micro_json(path)  # its shape checked: a bad file is one error line
    plots = run / "plots"
    body = [
        f"<p class='note'>Grid: {esc(micro.get('grid', ''))}; each cell is a {{metric, PDF}} "
        "fitted on train and scored on valid (paper Table 1, step 4); the lowest valid "
        "perplexity is selected.</p>"
    ]
    for name, entry in micro.get("classes", {}).items():
        chosen = entry.get("selected", {})
        pdf = chosen.get("pdf", {})
        body.append(
            f"<h3>&lt;{esc(name)}&gt;: {esc(chosen.get('metric'))} + {esc(pdf.get('name'))}"
            f" <span class='muted'>({esc(chosen.get('context', ''))} context, |V_c| = "
            f"{number(entry.get('vc_size'))}, valid ppl {number(entry.get('valid_ppl'))})</span>"
            f"</h3><p class='note'>fitted: {_fitted_summary(pdf)}</p>"
        )
        cells = sorted(entry.get("grid", []), key=lambda c: c.get("valid_ppl") or float("inf"))
        if cells:
            rows = [
                (c.get("metric"), c.get("context", ""), c.get("pdf"), number(c.get("valid_ppl"), 2))
                for c in cells
            ]
            body.append(table(["metric", "context", "PDF", "valid ppl"], rows))
        for png in sorted(plots.glob(f"{name}_*.png")) if plots.is_dir() else []:
            body.append(figure(png, f"<{name}>: fitted PDF over the training histogram"))
    if plot_hint and not plots.is_dir():
        body.append(
            f"<p class='note'>Fitted PDF figures: <code>nslm micro plot {esc(run)}</code>"
            " (needs the corpus), then report again.</p>"
        )
    return "micro", "Micro-models", "".join(body)


def context_models(run: Path) -> Section | None:
    """The context-aware micro-models (``nslm micro fit RUN --context``): per class, its
    components and whether the gate beat the plain micro-model on valid."""
    path = run / "micro_context.json"
    if not path.is_file():
        return None
    from nslm.runs.context_micro import TRIED  # the fitting side (scipy) only when needed

    rows = []
    for name, entry in read_json(path).get("classes", {}).items():
        tried = entry.get("valid_nll", {})
        cells = [number(math.exp(tried[k]), 2) if k in tried else "" for k in TRIED]
        parts = [c.get("name", "") for c in entry.get("components", [])]
        kept = entry.get("kind", "") if entry.get("kept") else entry.get("why", "no: plain")
        rows.append((f"<{name}>", *cells, kept, ", ".join(parts)))
    body = (
        "<p class='note'>A gate on the LM's hidden state mixes each class's micro-models "
        "(mixture), or shifts the bins of its metric (shifted); valid perplexity of P_MM "
        "at the class's positions (docs/context-micro-models.md). The NSLM-context column "
        "of the tables uses the kept ones.</p>"
        + table(
            [
                "class",
                "plain",
                "mixture",
                "shifted",
                "shifted + mixture",
                "kept",
                "mixture's components",
            ],
            rows,
        )
    )
    return "context", "Context-aware micro-models", body


def rarity(run: Path) -> Section | None:
    """Perplexity by training count (paper Figure 3) of every ``rarity_<split>.json``."""
    body = []
    for path in sorted(run.glob("rarity_*.json")):
        data = read_json(path)
        split = path.stem.removeprefix("rarity_")
        for name, buckets in data.get("tables", {}).items():
            models = list(next(iter(buckets.values()), {}))
            rows = [
                [bucket, number(next(iter(cols.values()), {}).get("tokens"))]
                + [number(cols[m].get("ppl")) for m in models]
                for bucket, cols in buckets.items()
            ]
            body.append(f"<h3>{esc(name)} ({esc(split)})</h3>")
            body.append(table(["train count", "tokens", *models], rows, sortable=False))
        png = path.with_suffix(".png")
        if png.is_file():
            body.append(figure(png, f"perplexity by training count ({split})"))
    return ("rarity", "Perplexity by rarity", "".join(body)) if body else None


def _sentiment(summary: dict, folder: Path) -> str:
    rows = [
        (
            name,
            number(p.get("C"), 3),
            number(p.get("dev_acc"), 3),
            number(p.get("test_acc"), 3),
            f"{p.get('n_nonzero')}/{p.get('n_neurons')}",
            p.get("neuron"),
            number(p.get("neuron_test_acc"), 3),
        )
        for name, p in summary.get("poolings", {}).items()
    ]
    if "bow" in summary:
        rows.append(
            (
                "TF-IDF + LR (baseline)",
                number(summary["bow"].get("C"), 3),
                number(summary["bow"].get("dev_acc"), 3),
                number(summary["bow"].get("test_acc"), 3),
                "",
                "",
                "",
            )
        )
    rows.append(
        ("majority", "", "", number(summary.get("majority", {}).get("test_acc"), 3), "", "", "")
    )
    headers = ["features", "C", "dev", "test", "non-zero", "best neuron", "neuron alone"]
    sizes = ", ".join(f"{k} {v:,}" for k, v in summary.get("sizes", {}).items())
    html = (
        f"<p class='note'>{esc(summary.get('dataset'))}: {esc(sizes)}; best on dev: "
        f"{esc(summary.get('best_pooling'))}</p>" + table(headers, rows)
    )
    for png, caption in (
        ("weights.png", "probe weight per neuron"),
        ("neuron_histogram.png", "the best neuron by label"),
    ):
        if (folder / png).is_file():
            html += figure(folder / png, caption)
    return html


def _pos(summary: dict, folder: Path) -> str:
    rows = [
        (
            f"top {k}" if k != "all" else "all neurons",
            number(r["acc"], 3),
            number(r["precision"], 3),
            number(r["recall"], 3),
        )
        for k, r in summary.get("rows", {}).items()
    ]
    html = (
        f"<p class='note'>{number(summary.get('train_bytes'))} train bytes, "
        f"{number(summary.get('test_bytes'))} test bytes; majority "
        f"{number(summary.get('majority', {}).get('test_acc'), 3)}; SPACE with 3 neurons "
        f"{number(summary.get('space_top3_acc'), 3)}</p>"
    )
    html += table(["neurons", "accuracy", "precision", "recall"], rows, sortable=False)
    for png in sorted(folder.glob("weights_*.png")):
        tag = re.sub(r"^weights_", "", png.stem)
        html += figure(png, f"{tag}: probe weight per neuron")
    return html


def probes(run: Path) -> list[Section]:
    """A byte LM's probe summaries (``nslm probe``), one section per probe folder."""
    root = run / "probes"
    out = []
    for summary in sorted(root.glob("**/summary.json")) if root.is_dir() else []:
        data = read_json(summary)
        folder = summary.parent
        name = str(folder.relative_to(root))
        body = _pos(data, folder) if "rows" in data else _sentiment(data, folder)
        out.append((f"probe-{name.replace('/', '-')}", f"Probe: {name}", body))
    return out


INTERVENTION_FIGURES = (
    ("random_units.png", "Top-k units against k random units (mean ± sd over the draws)"),
    ("selectivity.png", "Selectivity: probe accuracy against its control task"),
    ("steered_sample.png", "A sample steered by the sentiment direction beside an unsteered one"),
)


def interventions(run: Path) -> Section | None:
    """The figures of benchmarks/neurons/neuron_interventions.py (RUN/probes/interventions/)."""
    folder = run / "probes" / "interventions"
    shown = [
        figure(folder / name, caption)
        for name, caption in INTERVENTION_FIGURES
        if (folder / name).is_file()
    ]
    if not shown:
        return None
    note = (
        "<p>Do the probed units matter? <code>python benchmarks/neurons/neuron_interventions.py "
        f"--run {esc(run)}</code>; the figures are in benchmarks/results/neurons.json.</p>"
    )
    return ("probe-interventions", "Probes: controls, ablation, steering", note + "".join(shown))


def missing_hints(run: Path, cfg: dict) -> list[str]:
    """What a user can run to add the sections this run does not have yet."""
    hints = []
    word_lm = cfg.get("model") != "word-pos" and cfg.get("classes", "none") != "none"
    if word_lm and not (run / "micro.json").is_file():
        hints.append(f"Micro-models: <code>nslm micro fit {esc(run)}</code>.")
    if word_lm and not list(run.glob("tables_*.json")):
        hints.append(f"Tables 2 and 3: <code>nslm eval {esc(run)} --split test</code>.")
    return hints
