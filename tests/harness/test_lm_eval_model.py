"""nslm's runs behind lm-eval's model interface: the same proper scores through both doors,
a continuation's log-probability as the difference of two prefixes, greedy continuations,
generation cut at a stop sequence, and lm-eval's own evaluator driving it."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("lm_eval")

TEXT = "The war began in 1914 , and ended in 1918 .\nIt was the largest war .\n"


class Request:
    """What lm-eval hands a model: ``args``."""

    def __init__(self, *args) -> None:
        self.args = args


def test_the_model_is_registered_under_nslm() -> None:
    from lm_eval.api.registry import get_model

    from nslm.lm_eval import NslmLM

    assert get_model("nslm") is NslmLM


@pytest.mark.parametrize("micro", ["auto", "none"])
def test_rolling_is_nslms_own_score_and_continuations_are_prefix_differences(
    tiny_nslm_run, micro
) -> None:
    import nslm
    from nslm.lm_eval import NslmLM

    lm = NslmLM(run=str(tiny_nslm_run), micro=micro)
    own = nslm.load(tiny_nslm_run, micro=micro).score(TEXT)
    (rolling,) = lm.loglikelihood_rolling([Request(TEXT)], disable_tqdm=True)
    assert rolling == pytest.approx(-own.nats, rel=1e-12)
    context, continuation = "The war began in", " 1914 , and ended"
    ((ll, greedy),) = lm.loglikelihood([Request(context, continuation)], disable_tqdm=True)
    whole = nslm.load(tiny_nslm_run, micro=micro).score(context + continuation)
    # the continuation's tokens in the whole text: after the context's 4 words, before <eos>
    assert whole.tokens[4:-1] == ("1914", ",", "and", "ended")
    assert ll == pytest.approx(float(whole.log_probs[4:-1].sum()), rel=1e-9)
    assert ll < 0 and isinstance(greedy, bool)


def test_a_greedy_continuation_is_recognised(tiny_nslm_run) -> None:
    from nslm.lm_eval import NslmLM

    lm = NslmLM(run=str(tiny_nslm_run), micro="none")
    context = "The war began in"
    top = lm.model.predict(context, k=2)
    ((_, first),) = lm.loglikelihood([Request(context, " " + top[0].token)], True)
    ((_, second),) = lm.loglikelihood([Request(context, " " + top[1].token)], True)
    assert first and not second


def test_generation_is_greedy_and_stops_at_a_stop_sequence(tiny_nslm_run) -> None:
    from nslm.lm_eval import NslmLM

    lm = NslmLM(run=str(tiny_nslm_run), micro="none")
    request = Request("The war began in", {"until": ["."], "max_gen_toks": 12})
    (once,) = lm.generate_until([request], disable_tqdm=True)
    (again,) = lm.generate_until([request], disable_tqdm=True)
    assert once == again and "." not in once


def test_a_byte_lm_and_bad_arguments(tiny_byte_run) -> None:
    import nslm
    from nslm.errors import NslmError
    from nslm.lm_eval import NslmLM

    lm = NslmLM(run=str(tiny_byte_run))
    (rolling,) = lm.loglikelihood_rolling([Request("Hello there.\n")], disable_tqdm=True)
    assert rolling == pytest.approx(-nslm.load(tiny_byte_run).score("Hello there.\n").nats)
    with pytest.raises(NslmError, match="micro="):
        NslmLM(run=str(tiny_byte_run), micro="sideways")


def test_a_byte_lms_greedy_continuation_is_its_likeliest_bytes(tiny_byte_run) -> None:
    """Greedy for a byte LM is byte by byte; the choices of one context answered together
    are those answered one by one."""
    from nslm.lm_eval import NslmLM

    lm = NslmLM(run=str(tiny_byte_run))
    context = "Hello th"
    first, second = lm.model.predict(context, k=2)
    assert len(first.token) == len(second.token) == 1  # printable bytes
    then = lm.model.predict(context + first.token, k=1)[0].token
    continuations = [first.token + then, second.token, first.token + second.token]
    together = lm.loglikelihood([Request(context, c) for c in continuations], True)
    assert [g for _, g in together] == [True, False, then == second.token]
    for continuation, (log_prob, _) in zip(continuations, together, strict=True):
        ((alone, _),) = lm.loglikelihood([Request(context, continuation)], True)
        assert log_prob == pytest.approx(alone, rel=1e-12)


def rolling_task(folder, name: str, pages: list[str], metrics: tuple[str, ...]) -> None:
    """An lm-eval task ``name`` in ``folder`` (for --include_path): ``pages`` as a local
    JSON file (no hub), each scored whole (loglikelihood_rolling) with ``metrics``."""
    import json

    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps({"page": p}) + "\n" for p in pages), encoding="utf-8")
    listed = "".join(f"  - metric: {m}\n" for m in metrics)
    (folder / f"{name}.yaml").write_text(
        f"task: {name}\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {data}\n"
        "test_split: test\n"
        "output_type: loglikelihood_rolling\n"
        'doc_to_text: ""\n'
        'doc_to_target: "{{page}}"\n'
        f"metric_list:\n{listed}"
        "metadata:\n  version: 1.0\n",
        encoding="utf-8",
    )


def test_lm_evals_evaluator_drives_it_on_a_local_task(tiny_nslm_run, tmp_path) -> None:
    """simple_evaluate with a task built from a local JSON file (no hub): word perplexity and
    bits per byte as lm-eval defines them, from nslm's proper scores."""

    import lm_eval
    from lm_eval.tasks import TaskManager

    from nslm.lm_eval import NslmLM

    pages = [TEXT, "In 1990 , the town had 1,200 people .\n"]
    rolling_task(tmp_path, "tiny_pages", pages, ("word_perplexity", "bits_per_byte"))
    lm = NslmLM(run=str(tiny_nslm_run), micro="none")
    out = lm_eval.simple_evaluate(
        model=lm,
        tasks=["tiny_pages"],
        task_manager=TaskManager(include_path=str(tmp_path), include_defaults=False),
    )
    got = out["results"]["tiny_pages"]
    nats = sum(lm.model.score(p).nats for p in pages)
    size = sum(len(p.encode("utf-8")) for p in pages)
    assert got["bits_per_byte,none"] == pytest.approx(nats / math.log(2) / size, rel=1e-9)


def test_the_offline_tasks_are_built_from_the_data_and_run(tiny_nslm_run, tmp_path) -> None:
    """nslm data lm-eval-tasks: WikiText-2 and EWT test document by document, the number
    cloze and the conversion task, each a YAML lm-eval reads with --include_path; a slice
    of the cloze runs through lm-eval's evaluator."""
    import json

    import lm_eval
    from lm_eval.tasks import TaskManager

    from nslm.cli import main
    from nslm.lm_eval import NslmLM

    assert main(["data", "lm-eval-tasks", "--out-dir", str(tmp_path)]) == 0
    names = ("nslm_wikitext2", "nslm_wikitext2_text", "nslm_ewt", "nslm_number_cloze")
    for name in (*names, "nslm_conversion", "nslm_year_order"):
        assert (tmp_path / f"{name}.yaml").is_file()
    ewt = (tmp_path / "nslm_ewt.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(ewt) == 316  # EWT test's documents
    lines = (tmp_path / "nslm_number_cloze.jsonl").read_text(encoding="utf-8").splitlines()
    items = [json.loads(line) for line in lines]
    assert len(items) >= 1000
    for item in items[:200]:
        assert len(item["choices"]) == 4 and 0 <= item["label"] < 4
        digits = [sum(ch.isdigit() for ch in c) for c in item["choices"]]
        assert len(set(digits)) == 1 and len(set(item["choices"])) == 4  # same magnitude
    lines = (tmp_path / "nslm_year_order.jsonl").read_text(encoding="utf-8").splitlines()
    for item in map(json.loads, lines):  # the later year, and the year as far before
        later, before = (int(c) for c in item["choices"])
        assert item["label"] == 0 and 0 < later - before <= 2 * 30
        assert f"{later - item['gap']}" in item["context"]  # the year it comes after
    lm = NslmLM(run=str(tiny_nslm_run), micro="none")
    out = lm_eval.simple_evaluate(
        model=lm,
        tasks=["nslm_number_cloze"],
        task_manager=TaskManager(include_path=str(tmp_path), include_defaults=False),
        limit=12,
    )
    acc = out["results"]["nslm_number_cloze"]["acc,none"]
    assert 0.0 <= acc <= 1.0


def test_the_lm_eval_command_runs_a_local_task_on_a_run(tiny_nslm_run, tmp_path) -> None:
    """``nslm lm-eval run --model nslm …`` as a new user types it: exit 0 and lm-eval's
    table, whose bits per byte is the run's own proper score."""
    import subprocess
    import sys

    rolling_task(tmp_path, "tiny_page", [TEXT], ("bits_per_byte",))
    command = [
        *(sys.executable, "-m", "nslm", "lm-eval", "run", "--model", "nslm"),
        *("--model_args", f"run={tiny_nslm_run},micro=none", "--tasks", "tiny_page"),
        *("--include_path", str(tmp_path), "--output_path", str(tmp_path / "out")),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    row = next(line for line in done.stdout.splitlines() if "bits_per_byte" in line)
    from nslm.lm_eval import NslmLM

    lm = NslmLM(run=str(tiny_nslm_run), micro="none")
    want = lm.model.score(TEXT).nats / math.log(2) / len(TEXT.encode("utf-8"))
    shown = float(row.split("|")[7])
    assert shown == pytest.approx(want, rel=5e-4)  # the table prints four significant digits
