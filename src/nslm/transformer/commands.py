"""What the ``nslm`` commands call for a Transformer run: fit it, open it, predict the next
words after a prompt, score a plain text.

``fit_transformer_run(RUN)`` scores a WikiText-2 train prefix and a valid prefix (kept in
``RUN/scores``), fits ``RUN/micro.json``, the class head and λ_c; ``open_transformer_run``
reads all of it back (no corpus scoring, no refitting); ``predict`` and ``eval_text`` are
``nslm predict RUN PROMPT`` and ``nslm eval RUN --text FILE`` on such a run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nslm.data.locate import locate_corpus
from nslm.data.prepare import prepare_corpus
from nslm.data.text import to_plain
from nslm.data.textfile import read_text
from nslm.errors import NslmError
from nslm.micro.store import load_micro_models
from nslm.transformer.class_head import StartMass
from nslm.transformer.fit import (
    FIT_FILE,
    MICRO_FILE,
    fit_head,
    fit_micro_models,
    fit_weights,
    load_head,
)
from nslm.transformer.passes import TextPass, score_text
from nslm.transformer.predict import next_words
from nslm.transformer.run import TransformerRun, load_backbone, read_config, write_config
from nslm.transformer.scoring import MixtureParts, members_for
from nslm.transformer.tables import class_figures


def corpus_plain(name: str, split: str, max_lines: int = 0) -> str:
    """A corpus split (WikiText form) as plain text, detokenized by the text module."""
    lines = read_text(locate_corpus(name, download=False)[split]).split("\n")
    if max_lines:
        lines = lines[:max_lines]
    return to_plain(" <eos> ".join(lines).split(), "wikitext")


def fit_transformer_run(
    run_dir: Path, budgets: dict[str, int] | None = None, progress: bool = True, **config: Any
) -> dict[str, Any]:
    """Create (with ``config``) or reuse ``run_dir`` and fit everything above the frozen
    Transformer; returns ``RUN/transformer.json``'s payload."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.json").is_file():
        write_config(run_dir, **config)
    cfg = read_config(run_dir)
    corpus = prepare_corpus(cfg["corpus"], cfg["classes"])
    keep_corpus(run_dir, corpus)
    bundle = load_backbone(cfg)
    members = members_for(bundle, corpus)
    passes = prefix_passes(run_dir, cfg, bundle, corpus, members, budgets, progress)
    models = fit_micro_models(run_dir, corpus)
    return fit_above(run_dir, bundle, corpus, members, models, passes, progress)


def prefix_passes(
    run_dir: Path,
    cfg: dict[str, Any],
    bundle,
    corpus,
    members,
    budgets: dict[str, int] | None = None,
    progress: bool = True,
) -> dict[str, TextPass]:
    """The Transformer's passes over the WikiText-2 prefixes the fit reads (train: the
    head; valid: λ_c), of ``cfg``'s token budgets (or ``budgets``'), kept in RUN/scores."""
    budgets = {
        "valid": cfg["fit_valid_tokens"],
        "train": cfg["fit_train_tokens"],
        **(budgets or {}),
    }
    return {
        split: score_text(
            bundle,
            corpus,
            members,
            corpus_plain(cfg["corpus"], split, 4000 if split == "train" else 0),
            split,
            cache_dir=Path(run_dir) / "scores",
            max_tokens=limit,
            progress=progress,
        )
        for split, limit in budgets.items()
    }


def fit_above(run_dir: Path, bundle, corpus, members, models, passes, progress: bool) -> dict:
    """The class head (on h alone or reading the Transformer's start masses too, chosen on
    valid), λ_c and the functions, from the train and valid prefixes' ``passes``."""
    names = tuple(corpus.class_names)
    starts = StartMass.of(bundle, members, names[1:])
    head, choice = fit_head(run_dir, passes["train"], names, passes["valid"], starts)
    payload = fit_weights(
        run_dir, passes["valid"], passes["train"], members, models, head, names, head_choice=choice
    )
    return {**payload, "functions": fit_run_functions(run_dir, progress, passes["valid"])}


def refit_transformer_run(run_dir: Path, progress: bool = True) -> dict[str, Any]:
    """Fit a Transformer run's class head, λ_c and functions again, on the passes it was
    fitted on (read back from RUN/scores) and its own micro-models and members: what
    :func:`fit_transformer_run` does after scoring, for a run fitted by an earlier version."""
    run = open_transformer_run(Path(run_dir), functions=False)
    passes = prefix_passes(
        run.run_dir, run.config, run.bundle, run.corpus, run.members, progress=progress
    )
    return fit_above(run.run_dir, run.bundle, run.corpus, run.members, run.models, passes, progress)


def keep_corpus(run_dir: Path, corpus) -> None:
    """RUN/vocab.json and RUN/assets.* (:mod:`nslm.runs.assets`): the model side of the
    corpus (the vocabulary, each V_c, the unit map), so that the run opens without the raw
    corpus, as an LSTM run does."""
    from nslm.config.train_config import TrainConfig
    from nslm.files.atomic import write_json_atomic
    from nslm.runs.assets import write_run_assets

    cfg = read_config(Path(run_dir))
    write_json_atomic(Path(run_dir) / "vocab.json", {"itos": corpus.vocab.itos})
    write_run_assets(run_dir, TrainConfig(corpus=cfg["corpus"], classes=cfg["classes"]), corpus)


def run_corpus_of(run_dir: Path):
    """The run's corpus side: its own assets where it keeps them (:func:`keep_corpus`), else
    the prepared corpus (a run fitted before it kept them; this needs the raw corpus)."""
    from nslm.runs.assets import ASSETS_JSON, read_run_assets

    if (Path(run_dir) / ASSETS_JSON).is_file():
        return read_run_assets(run_dir)
    cfg = read_config(Path(run_dir))
    return prepare_corpus(cfg["corpus"], cfg["classes"], download=False)


def run_micro_models(run_dir: Path, micro_path: Path | None = None):
    """The run's corpus and its micro-models (RUN/micro.json, or ``micro_path``), without
    the backbone: ``nslm micro plot`` reads a Transformer run through this."""
    path = Path(micro_path) if micro_path is not None else Path(run_dir) / MICRO_FILE
    if not path.is_file():
        raise NslmError(f"{run_dir} has no {path.name}: fit the Transformer run first")
    corpus = run_corpus_of(run_dir)
    return corpus, load_micro_models(path, corpus)


def open_transformer_run(run_dir: Path, functions: bool = True) -> TransformerRun:
    """A fitted Transformer run (``fit_transformer_run`` first), with its functions where
    it has RUN/functions.json (``functions=False``: without)."""
    from nslm.transformer.functions import read_functions

    run_dir = Path(run_dir)
    cfg = read_config(run_dir)
    for needed in (MICRO_FILE, FIT_FILE, "class_head.safetensors"):
        if not (run_dir / needed).is_file():
            raise NslmError(f"{run_dir} has no {needed}: fit the Transformer run first")
    corpus, models = run_micro_models(run_dir)
    bundle = load_backbone(cfg)
    names = tuple(corpus.class_names)
    fitted = json.loads((run_dir / FIT_FILE).read_text(encoding="utf-8"))
    kept = read_functions(run_dir) if functions else None
    return TransformerRun(
        run_dir=run_dir,
        config=cfg,
        bundle=bundle,
        corpus=corpus,
        members=members_for(bundle, corpus),
        models=models,
        head=load_head(run_dir, names, bundle.model.lm_head.weight),
        lams={k: float(v) for k, v in fitted["lambdas"].items()},
        functions=kept[0] if kept else None,
        function_weights=kept[1] if kept else {},
    )


def predict(run: TransformerRun, prompt: str, k: int = 5, beam: int = 16) -> dict[str, Any]:
    """The top ``k`` next words after ``prompt``: the Transformer's and the mixture's, each
    member with its share from each class (λ_c · P(c | h) · P_MM(w | c))."""
    words = next_words(run, prompt, k=k, beam=beam)
    out = {
        "prompt": prompt,
        "class_weight": words["gate"],
        "Transformer": [{"word": w.text, "p": w.transformer} for w in words["transformer"]],
        "Transformer+MM": [
            {"word": w.text, "p": w.mixture, "transformer": w.transformer, "classes": w.parts}
            for w in words["mixture"]
        ],
    }
    if "functions" in words:
        out["function_weight"] = words["function_weight"]
        out["function_detail"] = words["function_detail"]
        out["Transformer+functions"] = [
            {
                "word": w.text,
                "p": w.functions,
                "transformer": w.transformer,
                "classes": {
                    **{c: (1 - words["function_weight"]) * p for c, p in w.parts.items()},
                    **({"functions": w.function_part} if w.function_part > 0 else {}),
                },
            }
            for w in words["functions"]
        ]
    return out


def mixture_parts(
    run: TransformerRun, text: str, name: str = "text", *, keep: bool = True
) -> MixtureParts:
    """A plain text through the Transformer (the pass kept in RUN/scores unless ``keep`` is
    false), ready to be scored alone (``score(None)``) or with the micro-models
    (``score(run.lams)``)."""
    if not text.strip():
        raise NslmError(f"{name}: no text to score")
    cache_dir = run.run_dir / "scores" if keep else None
    text_pass = score_text(run.bundle, run.corpus, run.members, text, name, cache_dir=cache_dir)
    return MixtureParts(
        text_pass, run.members, run.models, run.head, run.class_names, functions=run.functions
    )


def mixture_parts_after(
    run: TransformerRun, context: str, continuations: list[str]
) -> tuple[list[MixtureParts], Any] | None:
    """:func:`mixture_parts` of ``context + c`` for each continuation, the context read once,
    and the context's keys and values (:func:`nslm.transformer.passes.score_after_context`;
    None where it cannot be); nothing is kept in RUN/scores."""
    from nslm.transformer.passes import score_after_context

    got = score_after_context(run.bundle, run.corpus, run.members, context, continuations)
    if got is None:
        return None
    passes, kept = got
    parts = [
        MixtureParts(p, run.members, run.models, run.head, run.class_names, functions=run.functions)
        for p in passes
    ]
    return parts, kept


def eval_text(run: TransformerRun, text: str, name: str = "text") -> dict[str, Any]:
    """Bits per byte (overall, Numbers, Locations, each class) and word perplexity of a plain
    text, for the Transformer and the Transformer with micro-models; the pass is kept."""
    parts = mixture_parts(run, text, name)
    text_pass = parts.text_pass
    out = {
        "Transformer": class_figures(text_pass, parts.score(None), run.class_names),
        "Transformer+MM": class_figures(text_pass, parts.score(run.lams), run.class_names),
    }
    if run.functions is not None:
        scored = parts.score(run.lams, run.function_weights)
        out["Transformer+functions"] = class_figures(text_pass, scored, run.class_names)
    return out


def fit_run_functions(run_dir: Path, progress: bool = True, valid: TextPass | None = None) -> dict:
    """Fit a Transformer run's functions on its corpus and λ_f on the valid prefix its λ_c
    were fitted on (``valid``, that prefix's pass; else the config's, read back from
    RUN/scores); writes RUN/functions.json."""
    from nslm.transformer.functions import (
        WEIGHT_GRID,
        WIDEST_WEIGHT,
        fit_function_weights,
        fit_functions,
        write_functions,
    )

    run = open_transformer_run(Path(run_dir), functions=False)
    cfg = run.config
    model = fit_functions(cfg["corpus"], str(run.corpus.meta.get("classes_option", "all")))
    if valid is None:
        valid = score_text(
            run.bundle,
            run.corpus,
            run.members,
            corpus_plain(cfg["corpus"], "valid"),
            "valid",
            cache_dir=run.run_dir / "scores",
            max_tokens=cfg["fit_valid_tokens"],
            progress=progress,
        )
    parts = MixtureParts(
        valid, run.members, run.models, run.head, run.class_names, cache=True, functions=model
    )
    weights, total = fit_function_weights(parts, run.lams)
    write_functions(run.run_dir, model, weights)
    return {
        "weights": weights,
        "weight_grid": list(WEIGHT_GRID),
        "at_grid_edge": sorted(n for n, v in weights.items() if v >= WIDEST_WEIGHT),
        "valid_log_prob": total,
        "valid_sites": len(parts.sites),
    }
