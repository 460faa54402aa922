"""``nslm demo``: the whole NSLM pipeline on WikiText-2 with a small, fast config.

prepare → train (``configs/demo.toml``) → micro fit (fast grid) → eval (Tables 2 and 3 on
test) → predict (the paper's William-the-Conqueror prompt). About 10 minutes on 2 cores;
a second call reuses the trained run and the fitted micro-models.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

import click

from nslm.cli.options import config_option, input_format_option, run_dir_option
from nslm.errors import NslmError

DEMO_CONFIG = "demo.toml"


def find_config(path: Path | None) -> Path:
    """``--config``, else ``configs/demo.toml`` here or in the source checkout nslm runs from."""
    if path is not None:
        return path
    here = Path("configs") / DEMO_CONFIG
    if here.is_file():
        return here
    import nslm

    checkout = Path(nslm.__file__).resolve().parents[2] / "configs" / DEMO_CONFIG
    if checkout.is_file():
        return checkout
    raise NslmError(f"no configs/{DEMO_CONFIG} here; give --config FILE")


class Stages:
    """Numbered stage headers with the elapsed time, on stderr (stdout keeps the results)."""

    def __init__(self, total: int) -> None:
        self.total, self.n, self.start = total, 0, time.perf_counter()

    def __call__(self, text: str) -> None:
        self.n += 1
        elapsed = time.perf_counter() - self.start
        click.secho(f"[{self.n}/{self.total}] {text}  (t = {elapsed:.0f} s)", err=True, bold=True)

    def done(self) -> float:
        return time.perf_counter() - self.start


@click.command("demo")
@click.argument("prompt", required=False, default=None)
@config_option("Training config [configs/demo.toml].")
@run_dir_option("The run directory; reused if it holds the demo.", default=Path("runs/demo"))
@click.option("--fresh", is_flag=True, help="Refit the micro-models even if micro.json exists.")
@input_format_option
def demo_command(
    prompt: str | None,
    config: Path | None,
    run_dir: Path,
    fresh: bool,
    input_format: str = "plain",
) -> None:
    """Prepare, train, fit micro-models, print Tables 2 and 3 and one prediction.

    The prediction is of PROMPT's next token (plain text) [the paper's William the
    Conqueror sentence, ending in 'and died in'].
    """
    from nslm.cli.eval import eval_tables
    from nslm.cli.train import _ensure_passive_openmp
    from nslm.config import class_rules_of, load_config
    from nslm.data import prepare_corpus
    from nslm.generation.predict import DEFAULT_PROMPT, predict
    from nslm.generation.predict_text import render
    from nslm.runs.micro import fit_run_micro, write_run_micro
    from nslm.runs.open import open_run
    from nslm.training.loop import train

    # the demo trains: wait passively in OpenMP, as `nslm train` does (re-executes once)
    _ensure_passive_openmp()
    prompt = prompt or DEFAULT_PROMPT
    stage = Stages(5)
    cfg = load_config(find_config(config))
    stage(f"prepare {cfg.corpus} with classes={cfg.classes}")
    prepare_corpus(cfg.corpus, cfg.classes, class_rules=class_rules_of(cfg), progress=True)

    if (run_dir / "results.json").is_file():
        stage(f"train: reusing the finished run in {run_dir}")
    elif (run_dir / "latest.json").is_file():
        stage(f"train: resuming {run_dir}")
        train(None, run_dir, resume=True)  # type: ignore[arg-type]
    else:
        budget = f"{cfg.max_minutes:g} min budget" if cfg.max_minutes else "no time limit"
        stage(f"train {cfg.num_layers}×{cfg.hidden_size} {cfg.model} into {run_dir} ({budget})")
        train(cfg, run_dir)
    loaded = open_run(run_dir, micro="none").loaded  # micro.json may not be fitted yet

    micro_path = run_dir / "micro.json"
    if micro_path.is_file() and not fresh:
        stage(f"micro fit: reusing {micro_path}")
    else:
        stage("micro fit --fast: {metric, PDF} grid search per class on validation")
        t0 = time.perf_counter()
        payload = fit_run_micro(
            loaded,
            fast=True,
            progress=lambda name: click.echo(
                f"  <{name}>  ({time.perf_counter() - t0:.0f} s)", err=True
            ),
        )
        write_run_micro(loaded, payload)

    stage("eval --split test: Tables 2 and 3 (λ tuned on validation)")
    click.echo("  scoring the test split with the NNLM, the HNLM and the NSLM …", err=True)
    results = eval_tables(run_dir, ("test",))

    stage(f"predict {prompt!r}")
    # opened again now that micro.json exists: the micro-models 'nslm predict' would use
    opened = open_run(run_dir)
    lam = results["test"]["lambda_global"]  # as 'nslm predict' uses it: a whole distribution
    result = predict(opened.loaded, opened.micro, prompt, k=10, lam=lam, input_format=input_format)
    click.echo(render(result))
    click.secho(f"demo done in {stage.done() / 60:.1f} min; run dir {run_dir}", err=True)
    click.echo(next_steps(run_dir), err=True)


def next_steps(run_dir: Path) -> str:
    """What to try after the demo, on its own run."""
    run = shlex.quote(str(run_dir))
    commands = [
        (f"nslm predict {run} 'The war began in 1914, and ended in'", "another prompt"),
        (f"nslm generate {run} 'In 1990,' --max-tokens 40", "sample text"),
        (f"nslm eval {run} --split test --cache", "add the neural-cache columns"),
        (f"nslm micro plot {run} --only year", "year PDF over its histogram"),
    ]
    width = max(len(c) for c, _ in commands)
    lines = [f"  {c:<{width}}  # {why}" for c, why in commands]
    setup = ["(in your shell: . .venv/bin/activate; predict and generate need only the run"]
    data = os.environ.get("NSLM_DATA_DIR")
    if data:  # eval and micro plot read the corpus, which make found through this variable
        setup.append(f" dir, eval and micro plot the corpus: export NSLM_DATA_DIR={data})")
    else:
        setup.append(" dir)")
    return "next, try:\n" + "\n".join(lines) + "\n" + "".join(setup)
