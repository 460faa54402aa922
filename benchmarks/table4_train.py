"""Train every run of the honest Table 4: the same number of training tokens for every row.

    python benchmarks/table4_train.py [--runs runs/table4] [--budgets small large] [--dry-run]

Rows: the NNLM/HNLM run behind NNLM, NSLM, NSLM-context and NSLM-open (configs/table4.toml)
and the seven numeral models of Spithourakis & Riedel (configs/table4-<model>.toml). Each
trains for a fixed number of optimizer steps (``max_steps``; every step is ``batch_size`` ×
``bptt`` = 2,800 training tokens in these configs), with the cosine schedule following the
steps and no wall-clock limit, so a busy machine changes only how long a run takes. Budgets:
``small`` ≈ 4.0 M tokens (the earlier 8-minute table's size) and ``large`` = 4 × that. At the
small budget ``softmax``, ``h-softmax-rnn``, ``d-rnn`` and the NNLM/HNLM run also train with
seeds 2 and 3 (the noise band). Every run keeps its weights every ~0.5 M tokens
(``keep_weights_every``) for the learning curves.

The runs go one at a time, in the order of ``jobs()``: a finished run (results.json) is
skipped, a started one resumes from its last checkpoint (``nslm train --resume``), so the
script can be stopped and started again across sessions. Each run logs to RUN.log beside it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKENS_PER_STEP = 80 * 35  # batch_size × bptt of configs/table4*.toml
BUDGETS = {"small": 1_429, "large": 4 * 1_429}  # steps: 4.0 M and 16.0 M tokens
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
    return [*nslm, str(job.config), *job.overrides(), "-o", str(run)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "table4")
    parser.add_argument("--budgets", nargs="+", default=list(BUDGETS), choices=list(BUDGETS))
    parser.add_argument("--dry-run", action="store_true", help="list the commands only")
    args = parser.parse_args()
    for job in jobs(args.budgets):
        run = job.run_dir(args.runs)
        if (run / "results.json").is_file():
            print(f"done: {run}", flush=True)
            continue
        argv = command(job, args.runs)
        print(" ".join(argv[1:]), flush=True)
        if args.dry_run:
            continue
        run.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        log = run.parent / f"{run.name}.log"
        with log.open("a", encoding="utf-8") as handle:
            code = subprocess.call(argv, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
        print(f"  exit {code} after {(time.perf_counter() - t0) / 60:.1f} min", flush=True)
        if code != 0:
            sys.exit(f"{run}: nslm train failed (exit {code}); see {log}")


if __name__ == "__main__":
    main()
