"""A model card for a run: RUN/README.md in the Hugging Face form (docs/lm-eval.md, "Model
cards"): YAML front matter (library, datasets, the data's license, tags, and the run's test
figures as ``model-index`` metrics), then what the model is, how it was trained (its config),
its figures, how to load it in Python and in lm-eval, and its limits.

Every figure comes from the run's own JSON files, read here and written as they are
(:func:`card_figures`), so a test can read the card back and find them equal.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from nslm.errors import NslmError
from nslm.files.atomic import write_bytes_atomic
from nslm.runs.kinds import locate_run

CARD = "README.md"
DATASETS = {  # corpus → (Hugging Face dataset id, the data's license)
    "wikitext-2": ("Salesforce/wikitext", "cc-by-sa-3.0"),
    "ud-english-ewt": ("universal_dependencies", "cc-by-sa-4.0"),
    "brown": ("nltk/brown", "other"),
    "imdb": ("stanfordnlp/imdb", "other"),
}
WHAT = {
    "nslm": "a word-level LSTM language model with the micro-models of Demeter & Downey "
    "(2020), 'Just Add Functions: A Neural-Symbolic Language Model' (the NSLM of Eq. 4 where "
    "RUN/micro.json is fitted; its NNLM head alone otherwise)",
    "numeral": "a numeral language model of Spithourakis & Riedel (2018) on nslm's LSTM",
    "byte": "a byte-level LSTM language model",
    "word_pos": "a word+POS joint LSTM language model",
    "ngram": "an interpolated modified Kneser-Ney n-gram language model",
    "transformer": "micro-models and functions over the frozen pretrained Transformer "
    "SmolLM2-135M (its GGUF, dequantized), mixed with it as one proper distribution",
}
LIMITS = {
    "transformer": "WikiText is built from Wikipedia, and SmolLM2 was pretrained on web text "
    "that very likely contains Wikipedia: its WikiText figures may be memory, not prediction "
    "(docs/transformer.md, 'Contamination').",
    "nslm": "Trained on one small corpus; its vocabulary is closed unless the open "
    "micro-models are fitted (a word outside it is scored by the spelling model).",
}


def _read(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def card_figures(run_dir: Path, kind: str) -> list[tuple[str, str, float]]:
    """(metric type, name, value) of the run's test figures, from its JSON files."""
    out: list[tuple[str, str, float]] = []
    for key, value in _read(run_dir / "results.json").items():
        if key.startswith("test_") and isinstance(value, (int, float)):
            out.append(("perplexity" if "ppl" in key else key, key, float(value)))
    if kind == "transformer":
        out += _transformer_figures(run_dir)
    if kind == "ngram":
        out += _ngram_figures(run_dir)
    model = _read(run_dir / "model.json")
    for key in ("test_perplexity", "perplexity"):
        if isinstance(model.get(key), (int, float)):
            out.append(("perplexity", key, float(model[key])))
    return out


def _transformer_figures(run_dir: Path) -> list[tuple[str, str, float]]:
    """Bits per byte of the valid prefix the run was fitted on (RUN/transformer.json) and of
    the last ``nslm eval RUN --text`` (RUN/eval_text.json)."""
    out = []
    fitted = _read(run_dir / "transformer.json").get("valid", {})
    if fitted.get("bytes"):
        for key, label in (("transformer_log_prob", "Transformer"), ("log_prob", "+MM")):
            if isinstance(fitted.get(key), (int, float)):
                bpb = -fitted[key] / math.log(2) / fitted["bytes"]
                out.append(("bits_per_byte", f"valid_bits_per_byte ({label})", bpb))
    for model, row in _read(run_dir / "eval_text.json").items():
        if isinstance(row, dict) and isinstance(row.get("bits_per_byte"), (int, float)):
            name = f"eval_text bits_per_byte ({model})"
            out.append(("bits_per_byte", name, float(row["bits_per_byte"])))
    return out


def _ngram_figures(run_dir: Path) -> list[tuple[str, str, float]]:
    """Perplexity per row of the n-gram's last ``nslm ngram eval MODEL -o MODEL/eval.json``."""
    got = _read(run_dir / "eval.json")
    rows = got.get("rows", {})
    return [
        ("perplexity", f"ngram_eval {got.get('split')} perplexity ({name})", float(row["ppl"]))
        for name, row in (rows.items() if isinstance(rows, dict) else ())
        if isinstance(row, dict) and isinstance(row.get("ppl"), (int, float))
    ]


def _yaml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML string


def render_card(run_dir: Path) -> str:
    ref = locate_run(run_dir, ngram=True)
    kind = ref.kind
    root = Path(run_dir) if Path(run_dir).is_dir() else Path(run_dir).parent
    config = _read(root / "config.json") or _read(root / "model.json")
    corpus = str(config.get("corpus", "wikitext-2"))
    dataset, license_ = DATASETS.get(corpus, (corpus, "other"))
    figures = card_figures(root, kind)
    front = [
        "---",
        "library_name: nslm",
        f"license: {license_}",
        "datasets:",
        f"- {dataset}",
        "tags:",
        *dict.fromkeys(["- nslm", f"- {kind}"]),
        "model-index:",
        f"- name: {_yaml_string(root.name)}",
        "  results:",
        "  - task:",
        "      type: text-generation",
        "    dataset:",
        f"      name: {_yaml_string(corpus)}",
        f"      type: {_yaml_string(dataset)}",
        "    metrics:",
    ]
    for metric, name, value in figures:
        front += [
            f"    - type: {metric}",
            f"      name: {_yaml_string(name)}",
            f"      value: {value!r}",
        ]
    if not figures:
        front[-1] = "    metrics: []"
    front.append("---")
    lines = [
        f"# {root.name}",
        "",
        f"An nslm run of kind `{kind}`: {WHAT.get(kind, kind)}. Trained (or fitted) on "
        f"`{corpus}`; the data's license is {license_}.",
        "",
        "## Figures",
        "",
        *(f"- {name}: {value:.6g}" for _, name, value in figures),
        *(["- none recorded yet"] if not figures else []),
        "",
        "## How it was made",
        "",
        "```json",
        json.dumps(config, indent=1, ensure_ascii=False),
        "```",
        "",
        "## Use",
        "",
        "```python",
        "import nslm",
        "",
        f'lm = nslm.load("{root.name}")  # this directory',
        'lm.predict("The war began in 1914, and ended in")',
        "```",
        "",
        "In lm-evaluation-harness (docs/lm-eval.md):",
        "",
        "```bash",
        "nslm data lm-eval-tasks --out-dir TASKS",
        f"nslm lm-eval run --model nslm --model_args run={root.name} \\",
        "    --include_path TASKS --tasks nslm_wikitext2",
        "```",
        "",
        "## Limits",
        "",
        LIMITS.get(kind, "Trained on one small corpus; see the nslm docs for what it measures."),
        "",
    ]
    return "\n".join(front) + "\n\n" + "\n".join(lines)


def write_card(run_dir: Path, out: Path | None = None) -> Path:
    """RUN/README.md (or ``out``), written atomically."""
    text = render_card(Path(run_dir))
    root = Path(run_dir) if Path(run_dir).is_dir() else Path(run_dir).parent
    path = Path(out) if out is not None else root / CARD
    if path.is_dir():
        raise NslmError(f"{path} is a directory; give a file for the card")
    write_bytes_atomic(path, text.encode("utf-8"))
    return path
