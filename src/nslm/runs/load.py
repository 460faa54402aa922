"""Load a trained run (config.json, vocab.json, layout.json, model.safetensors) for scoring.

The corpus side comes from the run's own assets (:mod:`nslm.runs.assets`): the run directory
alone serves ``predict`` and ``generate``; only scoring a split reads the corpus. Nothing is
unpickled: the weights are safetensors, the assets an npz without objects, the rest JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nslm.config import TrainConfig, read_config_json
from nslm.data.corpus import PreparedCorpus
from nslm.data.text import text_form_of
from nslm.errors import NslmError
from nslm.files.json_policy import read_json
from nslm.hooks import head_kinds
from nslm.models.hnlm_layout import HNLMLayout
from nslm.models.lm import LanguageModel
from nslm.runs.files import load_model_tensors
from nslm.scores.classes import ClassFactor, class_factor
from nslm.scores.passes import Scorer


@dataclass
class LoadedRun:
    """A trained run: its config, model in eval mode, corpus, and where P(c | h) comes from."""

    cfg: TrainConfig
    model: LanguageModel
    corpus: PreparedCorpus  # a nslm.runs.assets.RunCorpus unless load_run was given one
    run_dir: Path
    classes: ClassFactor | None = None  # the HNLM's top level, or the single-task sum (Table 8)

    @property
    def text_form(self) -> str:
        """How the run's corpus writes its tokens (:mod:`nslm.data.text`): what plain text is
        tokenized into, and what tokens are joined back from."""
        return text_form_of(self.corpus.meta, self.corpus.vocab.itos)

    def scorer(self, *, keep_features: bool = False) -> Scorer:
        """The one scoring pass with this run's evaluation settings (batch size, BPTT)."""
        return Scorer(
            self.model,
            self.classes,
            batch_size=self.cfg.eval_batch_size,
            bptt=self.cfg.bptt,
            keep_features=keep_features,
            accuracy=bool(self.corpus.vocab.is_bytes),  # a byte LM reports byte accuracy
        )


def load_run(run_dir: Path | str, corpus=None, *, weights: Path | str | None = None) -> LoadedRun:
    """The best weights of ``run_dir`` in eval mode, with the corpus it was trained on.

    ``weights``: another weights file of the same run instead, e.g. a kept checkpoint's
    (``RUN/kept/minute-005/model.safetensors``; see :func:`kept_checkpoints`).
    """
    run_dir = Path(run_dir)
    if not (run_dir / "config.json").is_file():
        raise NslmError(f"not a run directory (no config.json): {run_dir}")
    from nslm.runs.kinds import locate_run

    if locate_run(run_dir).kind == "transformer":
        raise NslmError(
            f"{run_dir} is a Transformer run: 'nslm predict', 'generate', 'eval --text', "
            "'report', 'serve' and 'micro plot' read it (docs/transformer.md)"
        )
    cfg = read_config_json(run_dir / "config.json")
    if corpus is None:
        # the run's own assets; splits load only when scored (a run without assets gets them)
        from nslm.runs.assets import run_corpus

        corpus = run_corpus(run_dir, cfg)
    itos = read_json(run_dir / "vocab.json").get("itos")
    if itos != corpus.vocab.itos:
        raise NslmError(f"{run_dir} was trained on a different vocabulary than this corpus")
    layout = None
    if "hnlm" in cfg.heads:
        layout = HNLMLayout.from_json(read_json(run_dir / "layout.json"))
    head_spec = None  # what another system's head (nslm.hooks) knew before training
    for name, kind in head_kinds().items():
        if name in cfg.heads:
            head_spec = kind.spec_from_json(read_json(run_dir / kind.spec_file))
    model = LanguageModel(cfg, len(itos), layout, head_spec)
    weights = run_dir / "model.safetensors" if weights is None else Path(weights)
    if not weights.is_file():
        raise NslmError(f"{run_dir} has no {weights.name} yet (training not far enough)")
    load_model_tensors(model, weights)
    model.eval()
    return LoadedRun(cfg, model, corpus, run_dir, class_factor(model, corpus))


def is_byte_lm(loaded: LoadedRun) -> bool:
    """Whether the run is a byte LM (the 256-byte vocabulary, an LSTM backbone)."""
    return bool(loaded.corpus.vocab.is_bytes) and loaded.cfg.model == "lstm"


def require_byte_lm(loaded: LoadedRun, what: str) -> None:
    """A one-line error unless ``loaded`` is a one-layer byte LSTM (``what`` needs one)."""
    if not is_byte_lm(loaded):
        raise NslmError(f"{what} needs a byte-LM run; {loaded.run_dir} is a word LM")
    if loaded.cfg.num_layers != 1 or loaded.cfg.locked_dropout:
        raise NslmError(f"{what} needs a one-layer byte LSTM (num_layers = 1, no locked dropout)")


def kept_checkpoints(run_dir: Path | str) -> dict[float, Path]:
    """The checkpoints a run kept at training-time marks (``keep_checkpoints_at_minutes``):
    {minutes: weights file}, in order. Load one with ``load_run(RUN, weights=path)``."""
    kept: dict[float, Path] = {}
    for entry in sorted(Path(run_dir).glob("kept/minute-*")):
        weights = entry / "model.safetensors"
        if weights.is_file():
            kept[float(entry.name.removeprefix("minute-"))] = weights
    return dict(sorted(kept.items()))


def kept_weights(run_dir: Path | str) -> dict[int, Path]:
    """The weights a run kept every ``keep_weights_every`` steps (learning curves):
    {step: weights file}, in order. Load one with ``load_run(RUN, weights=path)``."""
    kept = {}
    for path in Path(run_dir).glob("kept/step-*.safetensors"):
        kept[int(path.stem.removeprefix("step-"))] = path
    return dict(sorted(kept.items()))
