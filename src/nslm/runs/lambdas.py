"""The ensemble's λ a run's last ``nslm eval`` tuned on validation (RUN/tables_*.json), for
scoring another text or predicting without tuning again."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SavedLambdas:
    """λ of the ensemble λ·P_NNLM + (1 − λ)·P_NSLM as the run's last ``nslm eval`` tuned it
    on the run's validation split: one per table, and the Global one."""

    path: Path
    objective: str  # "table" or "global": what the per-table λ were tuned on
    lambda_global: float
    tables: dict[str, float]
    max_tokens: int  # > 0: tuned on a prefix of validation only


def saved_lambdas(run_dir: Path | str) -> SavedLambdas | None:
    """λ from RUN/tables_test.json or tables_valid.json (a full evaluation first), or None."""
    found: list[SavedLambdas] = []
    for name in ("tables_test.json", "tables_valid.json"):
        path = Path(run_dir) / name
        if not path.is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            found.append(
                SavedLambdas(
                    path=path,
                    objective=str(data.get("lambda_objective", "table")),
                    lambda_global=float(data["lambda_global"]),
                    tables={t: float(e["lambda"]) for t, e in data["tables"].items()},
                    max_tokens=int(data.get("max_tokens", 0)),
                )
            )
        except (KeyError, ValueError, TypeError, AttributeError, UnicodeDecodeError):
            print(f"warning: ignoring unreadable {path}", file=sys.stderr)
    return next((s for s in found if s.max_tokens == 0), found[0] if found else None)


def saved_global_lambda(run_dir: Path | str) -> float:
    """The Global λ of the run's last ``nslm eval`` (tuned on valid Global perplexity, the
    right one for a whole next-token distribution), or 0: the NSLM alone."""
    saved = saved_lambdas(run_dir)
    return 0.0 if saved is None else saved.lambda_global
