"""nslm's runs in lm-evaluation-harness: one table, every model, the same harness.

    python benchmarks/lm_eval/lm_eval_bench.py --lstm RUN --transformer RUN --byte RUN \
        --ngram MODEL [--work DIR] [--out benchmarks/results/lm_eval.json]

Builds nslm's offline tasks (``nslm data lm-eval-tasks``) into WORK/tasks, then runs every
task through lm-eval's own evaluator (``lm_eval.simple_evaluate``) for each model:

- the LSTM run (``--lstm``): ``NNLM`` (its head alone), ``NSLM`` (the micro-models),
  ``NSLM-context`` (the context-aware micro-models);
- the Transformer run (``--transformer``): ``Transformer``, ``Transformer+MM``,
  ``Transformer+functions``;
- ``byte LM`` (``--byte``: configs/byte-lm-wikitext2.toml, trained on the corpus that
  ``--write-byte-corpus DIR`` writes) and ``5-gram`` (``--ngram``: ``nslm ngram build
  --order 5``).

Each (task, model) result is kept in WORK/results as it finishes, so a run stopped part way
goes on where it stopped. Writes (with ``command``, ``date``, ``machine``):

- ``tasks``: keyed by task, then model: lm-eval's metrics, the items scored and the seconds;
- ``agreement``: keyed by model, the bits per byte of WikiText-2 test as one text through
  lm-eval (``loglikelihood_rolling`` on ``nslm_wikitext2_text``) and through ``nslm eval
  RUN --text`` (``nslm ngram eval MODEL --text``) on the same file, and their relative gap;
- ``number_cloze``: ``n`` and each model's accuracy;
- ``cli``: ``nslm lm-eval run …`` run as a user would, its ``command`` and ``exit_code``;
- ``cards``: per run kind, ``nslm card RUN`` parsed (``parsed``: the YAML front matter
  loads) and checked (``figures_match``: each figure equals the run's own JSON);
- ``setup``: the lock's size and a fresh ``make setup``'s time, as measured by hand
  (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from machine import machine_info, today
from nslm.files.atomic import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
NSLM = [sys.executable, "-m", "nslm"]
TASKS = (
    "nslm_wikitext2_text",
    "nslm_wikitext2",
    "nslm_ewt",
    "nslm_number_cloze",
    "nslm_conversion",
    "nslm_year_order",
)
MODELS = {  # name → (the run argument it comes from, micro)
    "NNLM": ("lstm", "none"),
    "NSLM": ("lstm", "plain"),
    "NSLM-context": ("lstm", "context"),
    "byte LM": ("byte", "auto"),
    "5-gram": ("ngram", "auto"),
    "Transformer": ("transformer", "none"),
    "Transformer+MM": ("transformer", "plain"),
    "Transformer+functions": ("transformer", "functions"),
}
METRICS = ("acc", "acc_norm", "word_perplexity", "byte_perplexity", "bits_per_byte")


def evaluate(lm, task: str, tasks_dir: Path) -> dict:
    """One task through lm-eval's evaluator: its metrics, the items and the seconds."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    t0 = time.perf_counter()
    out = lm_eval.simple_evaluate(
        model=lm,
        tasks=[task],
        task_manager=TaskManager(include_path=str(tasks_dir), include_defaults=False),
    )
    got = out["results"][task]
    metrics = {}
    for metric in METRICS:
        if f"{metric},none" in got:
            metrics[metric] = got[f"{metric},none"]
            stderr = got.get(f"{metric}_stderr,none")
            if isinstance(stderr, float) and math.isfinite(stderr):
                metrics[f"{metric}_stderr"] = stderr
    return {
        "metrics": metrics,
        "n": int(out["n-samples"][task]["effective"]),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def run_tasks(runs: dict[str, Path], work: Path, models: list[str]) -> dict:
    """Every task for every model, each result kept in WORK/results when done. The
    Transformer's three mixtures go task by task together: a text's Transformer pass is
    read once for the three (:mod:`nslm.lm_eval.model`)."""
    from nslm.lm_eval import NslmLM

    results = work / "results"
    results.mkdir(parents=True, exist_ok=True)
    opened: dict[str, NslmLM] = {}
    order = [(t, m) for m in models if MODELS[m][0] != "transformer" for t in TASKS]
    order += [(t, m) for t in TASKS for m in models if MODELS[m][0] == "transformer"]
    table: dict[str, dict] = {t: {} for t in TASKS}
    for task, model in order:
        path = results / f"{task}__{model.replace(' ', '_')}.json"
        if path.is_file():
            table[task][model] = json.loads(path.read_text(encoding="utf-8"))
            continue
        if model not in opened:
            source, micro = MODELS[model]
            opened[model] = NslmLM(run=str(runs[source]), micro=micro)
        print(f"{task} · {model}", flush=True)
        row = evaluate(opened[model], task, work / "tasks")
        write_json_atomic(path, row)
        table[task][model] = row
    return table


def nslm_eval(runs: dict[str, Path], text: Path, work: Path, models: list[str]) -> dict:
    """``nslm eval RUN --text FILE`` (``nslm ngram eval MODEL --text FILE``) per run of the
    ``models``: each model's bits per byte of the text, and the command."""
    out: dict[str, dict] = {}
    for source in ("lstm", "transformer", "byte", "ngram"):
        if source not in runs or all(MODELS[m][0] != source for m in models):
            continue
        dest = work / "nslm_eval" / f"{source}.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        group = ["ngram", "eval"] if source == "ngram" else ["eval"]
        command = [*NSLM, *group, str(runs[source]), "--text", str(text), "-o", str(dest)]
        if not dest.is_file():
            subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        got = json.loads(dest.read_text(encoding="utf-8"))
        shown = shlex.join(["nslm", *command[3:]])
        for model, (src, _) in MODELS.items():
            if src == source:
                bpb = _bits_per_byte(source, model, got)
                if bpb is not None:
                    out[model] = {"bits_per_byte": bpb, "command": shown}
    return out


def _bits_per_byte(source: str, model: str, got: dict) -> float | None:
    if source == "lstm":
        row = got.get("text", {}).get("models", {}).get(model)
    elif source == "transformer":
        row = got.get(model)
    elif source == "byte":
        row = got.get("text")
    else:
        row = got
    return float(row["bits_per_byte"]) if isinstance(row, dict) and "bits_per_byte" in row else None


def agreement(table: dict, own: dict) -> dict:
    out = {}
    for model, row in table["nslm_wikitext2_text"].items():
        if model not in own:
            continue
        lm_eval_bpb = row["metrics"]["bits_per_byte"]
        nslm_bpb = own[model]["bits_per_byte"]
        gap = abs(lm_eval_bpb - nslm_bpb) / nslm_bpb
        out[model] = {
            "lm_eval": lm_eval_bpb,
            "nslm_eval": nslm_bpb,
            "relative_gap": gap,
            "equal_within_1e-6": gap <= 1e-6,
            "nslm_command": own[model]["command"],
        }
    return out


def cli_check(runs: dict[str, Path], work: Path) -> dict:
    """``nslm lm-eval run`` as a user types it: a model from the Transformer-free runs on
    the year-order task, its exit status."""
    args = [
        "lm-eval",
        "run",
        "--model",
        "nslm",
        "--model_args",
        f"run={runs['lstm']},micro=context",
        "--tasks",
        "nslm_year_order",
        "--include_path",
        str(work / "tasks"),
        "--output_path",
        str(work / "cli"),
    ]
    done = subprocess.run([*NSLM, *args], cwd=ROOT, capture_output=True, text=True)
    return {
        "command": shlex.join(["nslm", *args]),
        "exit_code": done.returncode,
        "stdout_tail": done.stdout[-1500:],
    }


def cards(runs: dict[str, Path], work: Path) -> dict:
    """Each run's card (``nslm card RUN -o FILE``): the front matter parsed, and every
    figure in it found in the run's own JSON files."""
    import yaml

    from nslm.runs.kinds import locate_run

    out = {}
    for run in runs.values():
        kind = locate_run(run, ngram=True).kind
        dest = work / "cards" / f"{kind}.md"
        dest.parent.mkdir(parents=True, exist_ok=True)
        command = [*NSLM, "card", str(run), "-o", str(dest)]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        text = dest.read_text(encoding="utf-8") if dest.is_file() else ""
        try:
            meta = yaml.safe_load(text.split("---\n")[1]) if text.startswith("---\n") else None
        except yaml.YAMLError:
            meta = None
        metrics = (meta or {}).get("model-index", [{}])[0].get("results", [{}])[0]
        metrics = metrics.get("metrics", []) if isinstance(metrics, dict) else []
        root = run if run.is_dir() else run.parent
        found = [_in_run_json(root, m["name"], m["value"]) for m in metrics]
        out[kind] = {
            "run": str(run),
            "exit_code": done.returncode,
            "parsed": isinstance(meta, dict) and meta.get("library_name") == "nslm",
            "figures": len(metrics),
            "figures_match": bool(metrics) and all(found),
        }
    return out


def _in_run_json(root: Path, name: str, value: float) -> bool:
    """Whether the card's figure ``name`` = ``value`` is the run's own: read from its JSON
    files here, apart from the card's code."""

    def read(file: str) -> dict:
        path = root / file
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    if name.startswith("test_"):
        return read("results.json").get(name) == value
    if name in ("test_perplexity", "perplexity"):
        return read("model.json").get(name) == value
    if name.startswith("eval_text bits_per_byte ("):
        model = name.removeprefix("eval_text bits_per_byte (").removesuffix(")")
        return read("eval_text.json").get(model, {}).get("bits_per_byte") == value
    if name.startswith("ngram_eval "):
        got = read("eval.json")
        row = name.split("(", 1)[1].removesuffix(")")
        return name.split()[1] == got.get("split") and got["rows"][row]["ppl"] == value
    if name.startswith("valid_bits_per_byte ("):
        valid = read("transformer.json").get("valid", {})
        key = "transformer_log_prob" if "Transformer" in name else "log_prob"
        return math.isclose(-valid[key] / math.log(2) / valid["bytes"], value, rel_tol=1e-12)
    return False


def setup_cost(before: str) -> dict:
    """A fresh ``make setup`` into a new virtualenv from the lock as it was at commit
    ``before`` (before lm-eval joined it) and from today's, one after the other: packages,
    seconds and the virtualenv's size."""
    import shutil
    import tempfile

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        old_lock = Path(tmp) / "before.lock"
        old_lock.write_bytes(
            subprocess.run(
                ["git", "show", f"{before}:requirements.lock"],
                cwd=ROOT,
                check=True,
                capture_output=True,
            ).stdout
        )
        for name, lock in (("before", old_lock), ("after", ROOT / "requirements.lock")):
            venv = Path(tmp) / name
            t0 = time.perf_counter()
            subprocess.run(
                ["make", "setup", f"VENV={venv}", f"LOCK={lock}"],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file())
            out[name] = {
                "lock": str(lock.relative_to(ROOT))
                if name == "after"
                else f"{before}:requirements.lock",
                "packages": sum(1 for line in lock.read_text().splitlines() if line[:1].isalpha()),
                "seconds": round(time.perf_counter() - t0, 1),
                "venv_mb": round(size / 2**20),
            }
            shutil.rmtree(venv)
    return out


def write_plain_corpus(directory: Path) -> None:
    """WikiText-2's splits as plain text (nslm's detokenizer), one file each in
    ``directory``: the corpus of the byte LM row (``bytes:DIR``)."""
    from nslm.transformer.commands import corpus_plain

    directory.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        path = directory / f"{split}.txt"
        if not path.is_file():
            path.write_text(corpus_plain("wikitext-2", split), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lstm", type=Path, help="an NSLM run (micro fitted)")
    parser.add_argument("--transformer", type=Path, help="a Transformer run")
    parser.add_argument("--byte", type=Path, help="a byte LM run")
    parser.add_argument("--ngram", type=Path, help="an n-gram model")
    parser.add_argument("--numeral", type=Path, help="a numeral run, for its card")
    parser.add_argument("--work", type=Path, default=Path("runs/lm_eval"))
    parser.add_argument("--models", default=",".join(MODELS), help="which models, by name")
    parser.add_argument(
        "--write-byte-corpus",
        type=Path,
        metavar="DIR",
        help="only write WikiText-2 as plain text into DIR (the byte LM's corpus) and stop",
    )
    parser.add_argument(
        "--setup-before",
        help="a commit whose requirements.lock predates lm-eval: time a fresh make setup "
        "from it and from today's",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/lm_eval.json")
    args = parser.parse_args()
    if args.write_byte_corpus:
        write_plain_corpus(args.write_byte_corpus)
        return
    missing = [f"--{k}" for k in ("lstm", "transformer", "byte", "ngram") if not getattr(args, k)]
    if missing:
        parser.error(f"give {', '.join(missing)}")
    runs = {"lstm": args.lstm, "transformer": args.transformer, "byte": args.byte}
    runs["ngram"] = args.ngram
    models = [m for m in args.models.split(",") if m]
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}: choose from {list(MODELS)}")
    from nslm.lm_eval.tasks import build_tasks

    tasks_dir = args.work / "tasks"
    if not (tasks_dir / "nslm_year_order.yaml").is_file():
        print(build_tasks(tasks_dir), flush=True)
    text = args.work / "wikitext2_test.txt"
    if not text.is_file():
        page = json.loads((tasks_dir / "nslm_wikitext2_text.jsonl").read_text(encoding="utf-8"))
        text.write_text(page["page"], encoding="utf-8")
    table = run_tasks(runs, args.work, models)
    own = nslm_eval(runs, text, args.work, models)
    cloze = table["nslm_number_cloze"]
    card_runs = {**runs, **({"numeral": args.numeral} if args.numeral else {})}
    payload = {
        "command": shlex.join(["python", *sys.argv]),
        "date": today(),
        "machine": machine_info(),
        "tasks": table,
        "agreement": agreement(table, own),
        "number_cloze": {
            "n": min((row["n"] for row in cloze.values()), default=0),
            "accuracy": {m: row["metrics"]["acc"] for m, row in cloze.items()},
            "accuracy_norm": {m: row["metrics"]["acc_norm"] for m, row in cloze.items()},
        },
        "cli": cli_check(runs, args.work),
        "cards": cards(card_runs, args.work),
    }
    if args.setup_before:
        payload["setup"] = setup_cost(args.setup_before)
    write_json_atomic(args.out, payload, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
