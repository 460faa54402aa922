"""Train every run of the honest Table 4: the same number of training tokens for every row.

    python benchmarks/table4_train.py [--runs runs/table4] [--budgets small large]
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
log and its wall time goes to RUN/fit_times.json, which benchmarks/table4.py reports as
``outside_budget``.

The runs go one at a time, in the order of ``jobs()``: a finished run (results.json) is
skipped, a started one resumes from its last checkpoint (``nslm train --resume``), so the
script can be stopped and started again across sessions. Each run logs to RUN.log beside
it. ``--fit-only`` trains nothing and fits the finished NNLM/HNLM runs that lack fits.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from nslm.files.atomic import write_json_atomic

ROOT = Path(__file__).resolve().parents[1]
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
    budget: str
    row: str
    seed: int

    @property
    def config(self) -> Path:
        name = "table4.toml" if self.row == "nnlm" else f"table4-{self.row}.toml"
        return ROOT / "configs" / name

    def run_dir(self, runs: Path) -> Path:
        return runs / self.budget / f"{self.row}-seed{self.seed}"

    def overrides(self) -> list[str]:
        sets = [
            "max_minutes=0",
            f"max_steps={BUDGETS[self.budget]}",
            f"seed={self.seed}",
            f"keep_weights_every={KEEP_EVERY}",
            "progress=false",
        ]
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
    if code != 0:  # the training goes on: benchmarks/table4.py says what is missing
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "table4")
    parser.add_argument("--budgets", nargs="+", default=list(BUDGETS), choices=list(BUDGETS))
    parser.add_argument("--dry-run", action="store_true", help="list the commands only")
    parser.add_argument(
        "--fit-only", action="store_true", help="train nothing: fit the finished NNLM runs"
    )
    args = parser.parse_args()
    for job in jobs(args.budgets):
        run = job.run_dir(args.runs)
        if (run / "results.json").is_file():
            print(f"done: {run}", flush=True)
        elif args.fit_only:
            continue
        else:
            argv = command(job, args.runs)
            print(" ".join(argv[1:]), flush=True)
            if not args.dry_run:
                run.parent.mkdir(parents=True, exist_ok=True)
                t0 = time.perf_counter()
                with log_of(run).open("a", encoding="utf-8") as handle:
                    code = subprocess.call(argv, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
                print(f"  exit {code} after {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
                if code != 0:
                    sys.exit(f"{run}: nslm train failed (exit {code}); see {log_of(run)}")
        if job.row == "nnlm":
            fit_all(run, args.dry_run)


if __name__ == "__main__":
    main()
