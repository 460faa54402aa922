"""Train every run of the honest Table 4: the same number of training tokens for every row.

    python benchmarks/table4/table4_train.py [--runs runs/table4] [--budgets small large]
                                      [--dry-run | --fit-only]

Rows: the NNLM/HNLM run behind NNLM, NSLM, NSLM-context and NSLM-open (configs/table4.toml)
and the seven numeral models of Spithourakis & Riedel (configs/table4-<model>.toml). Each
trains for a fixed number of optimizer steps (``max_steps``; every step is a window of
``batch_size`` × ``bptt`` = 2,800 positions in these configs, of which the padding at the
end of the shorter streams is not trained on: docs/numerals.md, "A token budget"), with the
cosine schedule following the steps and no wall-clock limit, so a busy machine changes only
how long a run takes. Budgets: ``small`` = 1,429 steps (≈ 4.0 M tokens, the earlier
8-minute table's size) and ``large`` = 4 × that. At the small budget ``softmax``,
``h-softmax-rnn``, ``d-rnn`` and the NNLM/HNLM run also train with seeds 2 and 3 (the noise
band). Every run keeps its weights every ~0.5 M tokens (``keep_weights_every``) for the
learning curves.

Right after an NNLM/HNLM run has trained, its micro-models are fitted outside the training
budget (``FITS``): ``nslm micro fit RUN --fast`` (micro.json and the open micro-models,
open.json + open.safetensors, whose gates read this run's LM states) and then
``nslm micro fit RUN --context`` (micro_context.json, the NSLM-context row). A fit is
skipped when its file is newer than the run's model.safetensors. Each fit logs to the run's
log and its wall time goes to RUN/fit_times.json, which benchmarks/table4/table4.py reports as
``outside_budget``.

The runs go one at a time, in the order of ``jobs()``: a finished run (results.json) is
skipped, a started one resumes from its last checkpoint (``nslm train --resume``), so the
script can be stopped and started again across sessions. Each run logs to RUN.log beside
it. ``--fit-only`` trains nothing and fits the finished NNLM/HNLM runs that lack fits.

``--budgets converged`` trains Table 4 to convergence (``converged/ROW-seed1``): the
NNLM/HNLM run and the softmax, d-RNN and combination numeral models, each for at most
``CONVERGED_STEPS`` (4 × the large budget, ≈ 63 M tokens, the cosine schedule over them),
stopped early when valid Numbers perplexity has not improved for ``PATIENCE`` (6) epochs
(``early_stopping_on = "numbers"``; the best weights by it are kept). The NNLM/HNLM run goes
first; before each numeral model trains, its matched tuning sweep (``TUNING``: learning
rate × dropout, and the d-RNN's ``digit_size`` at the chosen pair) runs at the small budget
(``tuning/ROW/CELL``), and the cell with the lowest valid Numbers perplexity sets that
model's values at convergence. A choice at an edge of its grid widens the grid by one step
that way (up to ``MAX_WIDENINGS`` times) before it is used. These runs take one process of
one thread each (``processes=1``: the same streams and steps as two, so the machine keeps
a core for other work); training resumes across sessions as the budgets' runs do.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from nslm.files.atomic import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
TOKENS_PER_STEP = 80 * 35  # batch_size × bptt of configs/table4*.toml: one window's grid
BUDGETS = {"small": 1_429, "large": 4 * 1_429}  # steps: ~4.0 M and ~16 M tokens
KEEP_EVERY = 179  # steps: ~0.5 M tokens between the learning curves' points
ROWS = (
    "nnlm",
    "softmax",
    "softmax-rnn",
    "h-softmax",
    "h-softmax-rnn",
    "d-rnn",
    "mog",
    "combination",
)
SEEDED_ROWS = ("nnlm", "softmax", "h-softmax-rnn", "d-rnn")  # seeds 1–3 at the small budget
SEEDS = (1, 2, 3)
FIT_TIMES = "fit_times.json"
CONVERGED_STEPS = 16 * 1_429  # 4 × the large budget: ≈ 63 M tokens
# epochs (≈ 2.08 M tokens each) without a new best valid Numbers perplexity: on 6,658 tokens
# it moves by ±5% from epoch to epoch, so a shorter patience stops a model whose overall
# perplexity still falls (BENCHMARKS.md, "At convergence")
PATIENCE = 6
CONVERGED_ROWS = ("nnlm", "softmax", "d-rnn", "combination")
MAX_WIDENINGS = 2
# The numeral models' matched tuning, at the small budget, on valid Numbers perplexity: the
# NNLM's own lr and dropout were chosen by sweeps of this size (configs/table4.toml).
TUNING = {
    "lr": (2e-3, 4e-3, 8e-3),
    "dropout": (0.1, 0.25, 0.4),
    "digit_size": (32, 64, 128),  # d-RNN only, at its chosen lr and dropout
}


@dataclass(frozen=True)
class Fit:
    """A fit of an NNLM/HNLM run's micro-models outside the training budget: ``nslm micro
    fit RUN`` with ``args``; done when ``output`` is newer than the run's weights."""

    name: str
    args: tuple[str, ...]
    output: str
    what: str


# --fast: the grid without the mixture of Gaussians, as nnlm-seed1's micro.json was fitted,
# so that every seed's micro-models come from the same grid
FITS = (
    Fit(
        "micro",
        ("--fast",),
        "open.json",
        "micro.json (the {metric, PDF} grid per class, chosen on valid) and the open "
        "micro-models open.json + open.safetensors (gated by this run's LM states)",
    ),
    Fit(
        "context",
        ("--context",),
        "micro_context.json",
        "the context-aware micro-models micro_context.json (gated by this run's LM states)",
    ),
)


@dataclass(frozen=True)
class Job:
    """One training run: a Table 4 row at a budget (``converged`` or a key of ``BUDGETS``),
    or a tuning cell (``cell`` names it; ``values`` are its config overrides)."""

    budget: str
    row: str
    seed: int
    values: tuple[tuple[str, object], ...] = ()
    cell: str = ""

    @property
    def config(self) -> Path:
        name = "table4.toml" if self.row == "nnlm" else f"table4-{self.row}.toml"
        return ROOT / "configs" / name

    def run_dir(self, runs: Path) -> Path:
        if self.cell:
            return runs / "tuning" / self.row / self.cell
        return runs / self.budget / f"{self.row}-seed{self.seed}"

    def overrides(self) -> list[str]:
        steps = CONVERGED_STEPS if self.budget == "converged" else BUDGETS[self.budget]
        sets = [
            "max_minutes=0",
            f"max_steps={steps}",
            f"seed={self.seed}",
            f"keep_weights_every={KEEP_EVERY}",
            "progress=false",
        ]
        if self.budget == "converged" or self.cell:
            sets += ["early_stopping_on=numbers", f"patience={PATIENCE}", "processes=1"]
            sets += ["threads=1"]
        sets += [f"{key}={value}" for key, value in self.values]
        return [word for s in sets for word in ("--set", s)]


def jobs(budgets: list[str]) -> list[Job]:
    """Seed 1 of every row first (a complete table), then the other seeds, budget by budget."""
    out = []
    for budget in budgets:
        out += [Job(budget, row, 1) for row in ROWS]
        if budget == "small":
            out += [Job(budget, row, s) for s in SEEDS[1:] for row in SEEDED_ROWS]
    return out


def command(job: Job, runs: Path) -> list[str]:
    run = job.run_dir(runs)
    nslm = [sys.executable, "-m", "nslm", "train"]
    if (run / "latest.json").is_file():
        return [*nslm, "--resume", str(run)]
    return [*nslm, "--config", str(job.config), *job.overrides(), "--run-dir", str(run)]


def log_of(run: Path) -> Path:
    return run.parent / f"{run.name}.log"


def fit_needed(run: Path, fit: Fit) -> bool:
    """No ``fit.output`` yet, or one older than the run's weights (fitted on others)."""
    out, weights = run / fit.output, run / "model.safetensors"
    return not out.is_file() or out.stat().st_mtime_ns <= weights.stat().st_mtime_ns


def fit_command(run: Path, fit: Fit) -> list[str]:
    return [sys.executable, "-m", "nslm", "micro", "fit", str(run), *fit.args]


def read_fit_times(run: Path) -> dict:
    path = run / FIT_TIMES
    return json.loads(path.read_text()) if path.is_file() else {}


def fit_run(run: Path, fit: Fit) -> None:
    """Run ``fit`` on ``run``, its output appended to the run's log, and record its wall time
    (and the cumulative seconds of each file it says it wrote) in RUN/fit_times.json."""
    argv = fit_command(run, fit)
    log = log_of(run)
    with log.open("a", encoding="utf-8") as handle:
        start = handle.tell()
        handle.write(f"\n$ {' '.join(['nslm', *argv[3:]])}\n")
        handle.flush()
        t0 = time.perf_counter()
        code = subprocess.call(argv, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
        seconds = time.perf_counter() - t0
    if code != 0:  # the training goes on: benchmarks/table4/table4.py says what is missing
        print(f"  {fit.name} fit failed (exit {code}); see {log}", flush=True)
        return
    with log.open(encoding="utf-8") as handle:
        handle.seek(start)
        wrote = {
            Path(m[1]).name: int(m[2])
            for m in re.finditer(r"^wrote (\S+) \((\d+) s\)$", handle.read(), re.M)
        }
    times = read_fit_times(run)
    times[fit.name] = {
        "command": " ".join(["nslm", "micro", "fit", "RUN", *fit.args]),
        "fits": fit.what,
        "seconds": round(seconds, 1),
        "seconds_note": "wall time of the whole command (corpus and run loaded included), "
        "on a machine that may be busy",
        "wrote_at_seconds": wrote,
        "finished": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    write_json_atomic(run / FIT_TIMES, times)
    print(f"  {fit.name} fit: {seconds / 60:.1f} min", flush=True)


def fit_all(run: Path, dry_run: bool) -> None:
    """Every fit of ``FITS`` that ``run`` (a finished NNLM/HNLM run) still needs."""
    for fit in FITS:
        if (run / "model.safetensors").is_file() and not fit_needed(run, fit):
            print(f"fitted: {run / fit.output}", flush=True)
            continue
        print(" ".join(["nslm", *fit_command(run, fit)[3:]]), flush=True)
        if not dry_run:
            fit_run(run, fit)


def train(job: Job, runs: Path, dry_run: bool) -> bool:
    """Train ``job`` unless it has finished; True when its results.json is there."""
    run = job.run_dir(runs)
    if (run / "results.json").is_file():
        print(f"done: {run}", flush=True)
        return True
    argv = command(job, runs)
    print(" ".join(argv[1:]), flush=True)
    if dry_run:
        return False
    run.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with log_of(run).open("a", encoding="utf-8") as handle:
        code = subprocess.call(argv, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
    print(f"  exit {code} after {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
    if code != 0:
        sys.exit(f"{run}: nslm train failed (exit {code}); see {log_of(run)}")
    return True


def valid_numbers_ppl(run: Path) -> float:
    """The lowest valid Numbers perplexity a finished run recorded (metrics.jsonl): the
    numeral head's perplexity at the number positions, which ranks a model's weights as its
    proper Numbers perplexity does (the spelling of <unk_num> adds the same for every cell)."""
    figures = []
    for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for key, value in record.items():
            if record.get("event") == "valid" and key.startswith("valid_ppl_numbers_"):
                figures.append(value)
    if not figures:
        raise SystemExit(f"{run}: metrics.jsonl records no valid Numbers perplexity")
    return min(figures)


def cell_name(values: dict[str, object]) -> str:
    return "-".join(f"{key}{value:g}" for key, value in values.items())


def widened(grid: tuple, chosen: object, key: str) -> tuple | None:
    """``grid`` one step wider past ``chosen`` when it is at an edge, else None."""
    values = sorted(grid)
    if chosen not in (values[0], values[-1]):
        return None
    low = chosen == values[0]
    if key == "lr":
        new = chosen / 2 if low else chosen * 2
    elif key == "dropout":  # a step of 0.15, stopped at 0 and 0.7, the range's own ends
        new = max(0.0, round(chosen - 0.15, 2)) if low else min(0.7, round(chosen + 0.15, 2))
        if new == chosen:
            return None  # already at an end of the range: no wider grid to try
    else:
        new = chosen // 2 if low else chosen * 2
    return tuple(sorted({*values, new}))


def sweep(row: str, runs: Path, grids: dict[str, tuple], fixed: dict, dry_run: bool) -> dict:
    """Every cell of ``grids`` (× ``fixed``) at the small budget, widened at a chosen edge.

    Returns {"grid", "cells": {name: figure}, "choice", "widened"}; "choice" is None while
    cells are untrained (a dry run)."""
    widenings: list[str] = []
    while True:
        cells = {}
        for combo in itertools.product(*grids.values()):
            values = {**fixed, **dict(zip(grids, combo, strict=True))}
            job = Job("small", row, 1, tuple(values.items()), cell_name(values))
            if train(job, runs, dry_run):
                cells[job.cell] = (values, valid_numbers_ppl(job.run_dir(runs)))
        total = math.prod(len(g) for g in grids.values())
        record = {"grid": {k: list(v) for k, v in grids.items()}, "fixed": fixed}
        record["cells"] = {name: figure for name, (_, figure) in cells.items()}
        record["widened"] = widenings
        if len(cells) < total:
            return {**record, "choice": None}
        values, _ = min(cells.values(), key=lambda item: item[1])
        edges = {k: widened(grids[k], values[k], k) for k in grids}
        edges = {k: g for k, g in edges.items() if g is not None}
        if not edges or len(widenings) >= MAX_WIDENINGS:
            at_edge = sorted(edges)
            return {**record, "choice": {k: values[k] for k in grids}, "at_edge": at_edge}
        for key, grid in edges.items():
            widenings.append(f"{key}: {list(grids[key])} -> {list(grid)}")
            grids = {**grids, key: grid}


def tune(row: str, runs: Path, dry_run: bool) -> dict | None:
    """The matched tuning of numeral model ``row``: lr × dropout, then (d-RNN) digit_size at
    the chosen pair. Writes runs/tuning/ROW/tuning.json; returns the chosen values, or None
    while cells are untrained."""
    base = {k: TUNING[k] for k in ("lr", "dropout")}
    stages = {"lr_dropout": sweep(row, runs, base, {}, dry_run)}
    chosen = stages["lr_dropout"]["choice"]
    if chosen is not None and row == "d-rnn":
        digits = {"digit_size": TUNING["digit_size"]}
        stages["digit_size"] = sweep(row, runs, digits, chosen, dry_run)
        extra = stages["digit_size"]["choice"]
        chosen = None if extra is None else {**chosen, **extra}
    if not dry_run:
        path = runs / "tuning" / row / "tuning.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, {"row": row, "stages": stages, "choice": chosen})
    return chosen


def converge(runs: Path, dry_run: bool) -> None:
    """The NNLM/HNLM run to convergence (then its fits), then each numeral model after its
    tuning sweep, at its chosen values."""
    for row in CONVERGED_ROWS:
        values: dict = {}
        if row != "nnlm":
            chosen = tune(row, runs, dry_run)
            if chosen is None:
                print(f"{row}: tuning cells untrained; its converged run waits", flush=True)
                continue
            values = chosen
        job = Job("converged", row, 1, tuple(values.items()))
        if train(job, runs, dry_run) and row == "nnlm":
            fit_all(job.run_dir(runs), dry_run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "table4")
    choices = [*BUDGETS, "converged"]
    parser.add_argument("--budgets", nargs="+", default=list(BUDGETS), choices=choices)
    parser.add_argument("--dry-run", action="store_true", help="list the commands only")
    parser.add_argument(
        "--fit-only", action="store_true", help="train nothing: fit the finished NNLM runs"
    )
    args = parser.parse_args()
    for job in jobs([b for b in args.budgets if b in BUDGETS]):
        run = job.run_dir(args.runs)
        finished = (run / "results.json").is_file()
        if not args.fit_only:
            finished = train(job, args.runs, args.dry_run)
        if job.row == "nnlm" and (finished or args.dry_run):
            fit_all(run, args.dry_run)
    if "converged" in args.budgets and not args.fit_only:
        converge(args.runs, args.dry_run)


if __name__ == "__main__":
    main()
