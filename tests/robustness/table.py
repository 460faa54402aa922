"""The battery's one table: a row per (command, input slot); the cases are its rows × kinds.

A new command joins the battery with a row: its command line, what it reads there (a file, a
file in a corpus folder, a run directory) and the kinds whose outcome differs from the
defaults of robustness.cases. A command line is a template (robustness.runner.command_line):
``{input}`` is the (broken) input, ``{out}`` the case's output folder, ``{config}`` a training
config of the world's with the row's ``config`` changes, and ``{run}``, ``{corpus}``, … the
world's files (robustness.world.World). ``nslm serve`` runs with uvicorn stubbed out:
getting as far as serving is its success.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robustness.inputs import FULL_BIG_LINE, MALFORMED_TOML, SMALL_BIG_LINE, TEXT_KINDS, toml_text
from robustness.world import World

# An extra kind of a file slot: its content, and what its error message must name.
Extra = tuple[Callable[[World], bytes], str]


@dataclass(frozen=True)
class Slot:
    """One input of one command.

    ``family``: ``file`` (the input is the file ``filename`` in the case folder), ``corpus``
    (a copy of the world's folder ``tree`` whose file ``filename`` is the input; ``{input}``
    names the copy) or ``run`` (a copy of ``base_run``, broken by mutate_run). ``expect``:
    kind → ``error``, ``ok``, ``same`` (exit 0, and what ``observe`` sees equals the clean
    input's) or ``ok_or_error``, where robustness.cases.Case.expected's default is wrong.
    """

    command: str
    input: str
    family: str
    template: str
    kinds: tuple[str, ...]
    filename: str = "the-input.txt"
    good: Callable[[World], bytes] | None = None
    extra: dict[str, Extra] = field(default_factory=dict)
    tree: Callable[[World], Path] = lambda w: w.corpus
    base_run: Callable[[World], Path] = lambda w: w.run
    config: dict[str, Any] = field(default_factory=dict)  # {config}: the world's, changed
    expect: dict[str, str] = field(default_factory=dict)
    observe: Callable[[Path, str], object] | None = None  # (case folder, stdout)
    big_line_bytes: int = SMALL_BIG_LINE
    env: dict[str, str] = field(default_factory=dict)  # a template too
    setup: Callable[[World, Path], None] | None = None  # (world, input path), before it runs

    @property
    def id(self) -> str:
        return f"{self.command} {self.input}"


def corpus_slot(command: str, template: str, filename: str = "train.txt", **more: Any) -> Slot:
    return Slot(command, f"CORPUS's {filename}", "corpus", template, TEXT_KINDS, filename, **more)


def file_slot(command: str, input: str, template: str, **more: Any) -> Slot:
    return Slot(command, input, "file", template, TEXT_KINDS + tuple(more.get("extra", ())), **more)


RUN_KINDS = (
    "clean",
    "missing",
    "file",
    "empty_dir",
    "config_binary",
    "config_wrong_shape",
    "other_vocabulary",
    "truncated_weights",
    "pickle_weights",
)
MICRO_KINDS = ("micro_wrong_shape", "micro_other_vocabulary")


def run_slot(command: str, template: str, more_kinds: tuple[str, ...] = (), **more: Any) -> Slot:
    return Slot(command, "RUN", "run", template, RUN_KINDS + more_kinds, **more)


# -- what a row observes of a success (for the CRLF and BOM variants) -------------------------


def _json_file(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _prepared_vocab(case: Path, _stdout: str) -> object:
    return [_json_file(p) for p in sorted((case / "out" / "p").glob("*/vocab.json"))]


def _ngram_vocab(case: Path, _stdout: str) -> object:
    info = _json_file(case / "out" / "model" / "model.json")
    return info["itos"], info["meta"]["ngrams"]


def _ngram_scores(case: Path, _stdout: str) -> object:
    payload = _json_file(case / "out" / "eval.json")
    # the scores: not the wall time, nor the model's path (the case's folder, not the clean's)
    return {k: v for k, v in payload.items() if k not in ("seconds", "model")}


def _micro_selection(case: Path, _stdout: str) -> object:
    payload = _json_file(case / "out" / "micro.json")
    return {name: entry["selected"] for name, entry in payload["classes"].items()}


def _run_file(name: str) -> Callable[[Path, str], object]:
    return lambda case, _stdout: (case / "out" / "run" / name).read_bytes()


# -- inputs built for a row ---------------------------------------------------------------------


def _read(path: Callable[[World], Path]) -> Callable[[World], bytes]:
    return lambda w: path(w).read_bytes()


def _wrong_shape_micro(world: World) -> bytes:
    payload = _json_file(world.micro)
    return json.dumps({**payload, "classes": list(payload["classes"])}).encode()


MICRO_FILE_KINDS: dict[str, Extra] = {
    "micro_wrong_shape": (_wrong_shape_micro, "the-micro.json"),
    "micro_other_vocabulary": (_read(lambda w: w.other_run / "micro.json"), "the-micro.json"),
}


def _toml_kinds(good: Callable[[World], dict[str, Any]], wrong: dict[str, Any]) -> dict[str, Extra]:
    """A config's TOML kinds: malformed, an unknown key, a wrong type, and the issue's
    out-of-range values."""

    def changed(**changes: Any) -> Callable[[World], bytes]:
        return lambda w: toml_text({**good(w), **changes}).encode()

    return {
        "malformed": (lambda w: MALFORMED_TOML, "the-config.toml"),
        "unknown_key": (changed(colour="red"), "colour"),
        "wrong_type": (changed(**wrong), next(iter(wrong))),
        "bptt_zero": (changed(bptt=0), "bptt"),
        "lr_negative": (changed(lr=-1), "lr"),
        "batch_size_huge": (changed(batch_size=10**9), "batch_size"),
    }


INCREMENT = {"epochs": 1, "epoch_pairs": 20, "emb_size": 8, "hidden_size": 8, "batch_size": 2}
CLASS_FILE_KINDS: dict[str, Extra] = {
    "malformed": (lambda w: MALFORMED_TOML, "the-classes.toml"),
    "unknown_key": (lambda w: b'colour = "red"\n', "colour"),
    "wrong_type": (lambda w: b"[classes.joiner]\nregex = 3\n", "regex"),
}
WORD_POS = {
    "model": "word-pos",
    "classes": "none",
    "hidden_size": 8,
    "emb_size": 8,
    "tag_emb_size": 4,
    "shape_emb_size": 4,
    "batch_size": 4,
    "epochs": 1,
}
BYTE_LM = {"classes": "none", "heads": ["nnlm"], "hidden_size": 16, "batch_size": 4, "bptt": 16}


def _beside_crnn_meta(world: World, weights: Path) -> None:
    """The world's CRNN JSON beside the case's weights: its fingerprint says "use them"."""
    for meta in world.crnn.glob("*.json"):
        shutil.copy(meta, weights.parent)


# nslm writes micro.json itself: a BOM (an editor's) may be read past or refused in one line.
NSLM_JSON = {"bom": "ok_or_error"}
# A byte LM reads any bytes: what is not UTF-8 text is text to it.
ANY_BYTES = {"binary": "ok", "non_utf8": "ok", "crlf": "ok", "bom": "ok"}
LABELLED = {"NSLM_DATA_DIR": "{labelled}"}
GENERATE = "'In 1990' --seed 1 --max-tokens 5"

# The table (one row a line or three, as a table reads; the formatter leaves it so).
# fmt: off
SLOTS: list[Slot] = [
    # -- a file in a corpus folder (a copy of the world's; {input} names the copy) ------------
    corpus_slot("data prepare", "data prepare --corpus {input} --classes numbers --prepared-dir "
                "{out}/p", observe=_prepared_vocab, big_line_bytes=FULL_BIG_LINE),
    corpus_slot("data stats", "data stats --corpus {input} --classes numbers --prepared-dir "
                "{out}/p --json -o {out}/stats.json", observe=_prepared_vocab),
    corpus_slot("ngram build", "ngram build --corpus {input} --out-dir {out}/model --order 3 "
                "--discount-fallback --classes numbers --prepared-dir {out}/p",
                observe=_ngram_vocab),
    corpus_slot("ngram build --raw", "ngram build --raw --corpus {input} --out-dir {out}/model "
                "--order 3 --discount-fallback", observe=_ngram_vocab),
    corpus_slot("micro fit", "micro fit --corpus {input} --classes numbers --only year --fast "
                "-o {out}/micro.json --prepared-dir {out}/p", observe=_micro_selection),
    corpus_slot("eval --corpus", "eval {run} --corpus {input} -o {out}/tables.json"),
    corpus_slot("train", "train --config {config} --run-dir {out}/run",
                config={"corpus": "{input}"}, observe=_run_file("vocab.json")),
    corpus_slot("train (word+POS)", "train --config {config} --run-dir {out}/run",
                tree=lambda w: w.tagged,
                config={**WORD_POS, "corpus": "tagged:{input}"}, observe=_run_file("vocab.json")),
    corpus_slot("train (byte LM)", "train --config {config} --run-dir {out}/run",
                tree=lambda w: w.byte_corpus,
                config={**BYTE_LM, "corpus": "bytes:{input}"}, expect=ANY_BYTES),
    corpus_slot("probe sentiment", "probe sentiment {byte_run} --no-bow --no-figures "
                "--train-texts 60 --out-dir {out}/probe", filename="sst2/train.txt",
                tree=lambda w: w.labelled,
                env={"NSLM_DATA_DIR": "{input}"}),
    # -- a file ------------------------------------------------------------------------------
    file_slot("train", "--config FILE", "train --config {input} --run-dir {out}/run",
              filename="the-config.toml",
              good=lambda w: toml_text(w.config()).encode(),
              extra=_toml_kinds(lambda w: w.config(), {"bptt": "long"}),
              observe=_run_file("config.json")),
    # the demo's clean config is minutes of WikiText-2: its bad ones only, each refused at once
    Slot("demo", "--config FILE", "file", "demo --config {input} --run-dir {out}/demo",
         ("missing", "empty", "directory", "binary", "non_utf8", "malformed", "unknown_key",
          "wrong_type", "bptt_zero", "lr_negative"), filename="the-config.toml",
         good=lambda w: toml_text(w.config()).encode(),
         extra=_toml_kinds(lambda w: w.config(), {"bptt": "long"})),
    file_slot("train", "--init-vectors FILE", "train --config {config} --init-vectors {input} "
              "--run-dir {out}/run", good=_read(lambda w: w.vectors),
              observe=_run_file("model.safetensors")),
    file_slot("experiment increment", "--config FILE", "experiment increment --sizes 20 --config "
              "{input} -o {out}/increment.json", filename="the-config.toml",
              good=lambda w: toml_text(INCREMENT).encode(),
              extra=_toml_kinds(lambda w: INCREMENT, {"epochs": "many"})),
    file_slot("micro fit", "--class-file FILE", "micro fit --corpus {corpus} --classes none "
              "--fast --class-file {input} -o {out}/micro.json", filename="the-classes.toml",
              good=_read(lambda w: w.class_file), extra=CLASS_FILE_KINDS,
              observe=_micro_selection),
    file_slot("micro list", "--plugin FILE.py", "micro list --plugin {input}",
              filename="the_plugin.py", expect={"empty": "ok"},
              good=lambda w: b'"""A plug-in that registers nothing."""\nimport math\n'),
    file_slot("micro eval", "--micro-file FILE", "micro eval --corpus {corpus} --classes numbers "
              "--micro-file {input} --json", filename="the-micro.json",
              good=_read(lambda w: w.micro),
              extra=MICRO_FILE_KINDS, expect=NSLM_JSON),
    file_slot("micro plot", "--micro-file FILE", "micro plot --corpus {corpus} --classes numbers "
              "--micro-file {input} --out-dir {out}/plots", filename="the-micro.json",
              good=_read(lambda w: w.micro), extra=MICRO_FILE_KINDS, expect=NSLM_JSON),
    file_slot("eval", "--text FILE", "eval {run} --text {input} -o {out}/tables.json",
              good=_read(lambda w: w.corpus / "valid.txt")),
    file_slot("eval (byte LM)", "--text FILE", "eval {byte_run} --text {input} -o {out}/e.json",
              good=_read(lambda w: w.corpus / "valid.txt"), expect=ANY_BYTES),
    # a CRNN the fingerprint says to use; missing, it is trained afresh
    file_slot("eval --crnn", "--crnn-dir's weights", "eval {run} --split valid --crnn "
              "--crnn-steps 1 --crnn-dir {folder}/crnn -o {out}/tables.json",
              filename="crnn/crnn-year.safetensors", setup=_beside_crnn_meta,
              good=_read(lambda w: w.crnn / "crnn-year.safetensors"),
              expect={"missing": "ok", "crlf": "ok_or_error", "bom": "error"}),
    file_slot("ngram eval", "MODEL (an ARPA file)", "ngram eval {input} --corpus {corpus} "
              "--classes numbers --json -o {out}/eval.json", filename="the-model.arpa",
              good=_read(lambda w: w.arpa), big_line_bytes=FULL_BIG_LINE,
              observe=_ngram_scores),
    file_slot("ngram export-arpa", "MODEL (an ARPA file)", "ngram export-arpa {input} "
              "-o {out}/copy.arpa", filename="the-model.arpa", good=_read(lambda w: w.arpa)),
    file_slot("generate", "RUN (an ARPA file)", "generate {input} " + GENERATE,
              filename="the-model.arpa", good=_read(lambda w: w.arpa)),
    # -- a run directory (a copy of a world run, broken one way per kind) ------------------------
    run_slot("eval", "eval {input} -o {out}/tables.json", ("other_corpus", *MICRO_KINDS)),
    run_slot("eval --model neural", "eval {input} --model neural -o {out}/eval.json",
             ("other_corpus",)),
    run_slot("predict", "predict {input} 'In 1990 and'", ("other_corpus", *MICRO_KINDS),
             expect={"other_corpus": "ok"}),
    run_slot("generate", "generate {input} " + GENERATE, ("other_corpus", *MICRO_KINDS),
             expect={"other_corpus": "ok"}),
    run_slot("micro fit", "micro fit {input} --fast --only year -o {out}/micro.json",
             ("other_corpus",)),
    run_slot("micro plot", "micro plot {input} --out-dir {out}/plots",
             ("other_corpus", *MICRO_KINDS)),
    # A report shows what the run's files hold: it reads no weights and checks no micro.json
    # against the vocabulary (it builds no model).
    run_slot("report", "report {input} -o {out}/report.html", MICRO_KINDS,
             expect={"truncated_weights": "ok", "pickle_weights": "ok",
                     "other_vocabulary": "ok", "micro_other_vocabulary": "ok"}),
    run_slot("serve", "serve {input}", MICRO_KINDS),
    Slot("train --resume", "RUN", "run", "train --resume {input}",
         ("clean", "missing", "file", "empty_dir", "config_binary", "config_wrong_shape",
          "checkpoint_truncated", "checkpoint_pickle")),
    run_slot("probe sentiment", "probe sentiment {input} --no-bow --no-figures --train-texts 60 "
             "--out-dir {out}/probe", base_run=lambda w: w.byte_run, env=LABELLED),
    run_slot("probe pos", "probe pos {input} --no-figures --train-bytes 400 --test-texts 5 "
             "--tags grouped --out-dir {out}/probe", base_run=lambda w: w.byte_run, env=LABELLED),
]
# fmt: on

# Cases that fail for a bug in a part of the package another change owns, reported rather
# than fixed here: (row id, kind) → where the bug is. The tests mark them xfail (strict, so
# the fix shows as XPASS and the entry goes) and the benchmark counts them apart from the
# failures. Empty: the ones the battery found are fixed.
KNOWN_BUGS: dict[tuple[str, str], str] = {}
