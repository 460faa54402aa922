"""One spelling per job across the ``nslm`` commands, and a first run without stumbles:
bare ``nslm``, one name per command and option (old spellings refused), list options,
``--model``, the missing-run message, help texts and the training messages. The whole
vocabulary is tests/cli/test_cli_vocabulary.py's."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from helpers import make_years_corpus as make_corpus
from nslm.cli import cli, main
from nslm.cli.demo import next_steps
from nslm.cli.options import split_names, use_nslm

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
NO_RUN = "(expected a directory with config.json; train one with 'nslm train')"


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def all_commands(group: click.Group = cli, path: tuple[str, ...] = ("nslm",)):
    for name, command in group.commands.items():
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from all_commands(command, (*path, name))


def test_bare_nslm_prints_the_help_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    captured = capsys.readouterr()
    assert "Usage: nslm" in captured.out and "demo" in captured.out
    assert not captured.err


def test_every_option_has_a_help_text() -> None:
    missing = [
        f"{' '.join(path)} {'/'.join(p.opts)}"
        for path, command in [(("nslm",), cli), *all_commands()]
        for p in command.params
        if isinstance(p, click.Option) and not p.hidden and not p.help
    ]
    assert not missing, missing


def test_no_summary_is_cut_in_a_parenthesis() -> None:
    # click cuts a summary at the first period: "(paper Eq. 1)" used to leave "(paper Eq."
    for path, command in all_commands():
        summary = command.get_short_help_str(limit=200)
        assert summary.count("(") == summary.count(")"), (path, summary)


def test_split_names_takes_commas_repetition_and_brackets() -> None:
    assert split_names(("year,city", "<month>", " ")) == ["year", "city", "month"]
    assert split_names(None) == [] and split_names("a, b") == ["a", "b"]


@pytest.fixture()
def bare_run(tmp_path: Path) -> Path:
    """A directory that passes for a run (config.json) without micro-models or weights."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}", encoding="utf-8")
    return run


@pytest.mark.parametrize("option", ["--split", "--only", "--metric", "--pdf"])
def test_list_options_take_commas_and_repetition_alike(option: str, bare_run: Path) -> None:
    command = {"--split": ["eval"], "--only": ["micro", "fit"]}.get(option, ["micro", "fit"])
    target = cli
    for name in command:
        target = target.commands[name]  # type: ignore[attr-defined]
    values = ("valid", "test") if option == "--split" else ("year", "city")
    base = [str(bare_run)]
    commas = target.make_context(command[-1], [*base, option, ",".join(values)])
    repeated = target.make_context(command[-1], [*base, option, values[0], option, values[1]])
    name = next(p.name for p in target.params if option in getattr(p, "opts", ()))
    assert commas.params[name] == repeated.params[name] == values


def test_cache_window_takes_commas_and_repetition_alike(bare_run: Path) -> None:
    from nslm.cli.paper_extras import PaperExtras

    eval_command = cli.commands["eval"]
    args = [str(bare_run), "--cache", "--cache-window", "50,200", "--cache-window", "400"]
    params = eval_command.make_context("eval", args).params
    assert PaperExtras(cache=True, cache_window=params["cache_window"]).grid.windows == (
        50,
        200,
        400,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "{run}"],
        ["eval", "{run}", "--model", "nslm"],
        ["predict", "{run}", "a prompt"],
        ["micro", "fit", "{run}", "--fast"],
        ["micro", "plot", "{run}"],
        ["train", "--resume", "{run}"],
    ],
)
def test_a_missing_run_is_one_message_everywhere(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-run"
    assert main([a.replace("{run}", str(missing)) for a in args]) == 2
    assert one_error_line(capsys) == f"error: no run at {missing} {NO_RUN}"


def test_generate_names_every_kind_it_reads(tmp_path: Path, capsys) -> None:
    """``generate`` also continues n-gram models: its message for a missing path says so."""
    missing = tmp_path / "no-such-run"
    assert main(["generate", str(missing), "a"]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"error: no run at {missing} (") and "config.json" in line
    assert "nslm ngram build" in line and "ARPA" in line


@pytest.mark.parametrize("command", ["eval", "generate"])
def test_model_nslm_without_micro_json_names_the_command_to_run(
    command: str, bare_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, str(bare_run), "--model", "nslm"]) == 2
    line = one_error_line(capsys)
    assert f"{bare_run / 'micro.json'}" in line and f"nslm micro fit {bare_run}" in line


def test_auto_says_which_model_and_why(bare_run: Path, capsys) -> None:
    from nslm.runs.kinds import locate_run

    bare_run = locate_run(bare_run)  # what the RUN argument converts to
    assert use_nslm(bare_run, "auto", "eval") is False
    err = capsys.readouterr().err
    assert "neural heads only" in err and f"nslm micro fit {bare_run}" in err
    (bare_run / "micro.json").write_text("{}")
    assert use_nslm(bare_run, "auto", "generate") is True
    assert "using the NSLM" in capsys.readouterr().err
    assert use_nslm(bare_run, "neural", "eval") is False
    assert not capsys.readouterr().err  # an explicit choice needs no explanation


def test_micro_fit_has_one_name_and_takes_lists_either_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One name, ``nslm micro fit``: the old ``fit-micro`` is an unknown command."""
    assert "fit-micro" not in cli.commands
    assert main(["fit-micro", "--help"]) == 2
    assert "No such command 'fit-micro'" in one_error_line(capsys)
    corpus = make_corpus(tmp_path / "years")
    common = [
        "--corpus",
        str(corpus),
        "--classes",
        "numbers",
        "--prepared-dir",
        str(tmp_path / "prepared"),
        "--fast",
    ]
    out_a, out_b = tmp_path / "a.json", tmp_path / "b.json"
    assert (
        main(
            ["micro", "fit", *common, "--only", "year", "--metric", "diff,value", "-o", str(out_a)]
        )
        == 0
    )
    assert (
        main(
            [
                "micro",
                "fit",
                *common,
                "--only",
                "year",
                "--metric",
                "diff",
                "--metric",
                "value",
                "--out",
                str(out_b),
            ]
        )
        == 0
    )
    a, b = (json.loads(p.read_text())["classes"]["year"] for p in (out_a, out_b))
    assert a["grid"] == b["grid"] and a["selected"] == b["selected"]
    assert {c["metric"] for c in a["grid"]} == {"diff", "value"}
    assert "mog" not in {c["pdf"] for c in a["grid"]}  # --fast without RUN too
    capsys.readouterr()
    assert main(["micro", "fit", "--fast"]) == 2  # neither RUN nor -o FILE
    assert "give RUN" in one_error_line(capsys)


def test_old_spellings_are_refused(tmp_path: Path, capsys) -> None:
    """The corpus is --corpus, prepared corpora --prepared-dir: no positional corpus, no
    --cache-dir (the old spellings, hidden aliases until issue 41)."""
    corpus = make_corpus(tmp_path / "years")
    args = ["data", "prepare", "--corpus", str(corpus), "--classes", "numbers"]
    assert main([*args, "--prepared-dir", str(tmp_path / "prepared")]) == 0
    assert any((tmp_path / "prepared").iterdir())
    capsys.readouterr()
    for old in (
        [*args, "--cache-dir", str(tmp_path / "old")],
        ["data", "prepare", str(corpus)],
        ["data", "stats", "--output", str(tmp_path / "s.json")],
        ["train", "--config", str(CONFIGS / "tiny.toml"), "-o", str(tmp_path / "run")],
    ):
        assert main(old) == 2, old
        line = one_error_line(capsys)
        assert "No such option" in line or "unexpected extra argument" in line, line
    assert not (tmp_path / "old").exists() and not (tmp_path / "run").exists()


def test_increment_config_is_pointed_to_its_command(capsys) -> None:
    config = CONFIGS / "increment.toml"
    assert main(["train", "--config", str(config)]) == 2
    assert f"nslm experiment increment --config {config}" in one_error_line(capsys)


def test_the_demo_ends_with_next_commands_on_its_run(monkeypatch) -> None:
    monkeypatch.setenv("NSLM_DATA_DIR", "/data/here")
    text = next_steps(Path("runs/my demo"))
    assert ". .venv/bin/activate" in text and "export NSLM_DATA_DIR=/data/here" in text
    lines = [line for line in text.splitlines() if line.startswith("  nslm ")]
    commands = [line.split("#")[0].strip() for line in lines]
    assert len(commands) == 4
    assert all("'runs/my demo'" in c for c in commands)
    assert [c.split()[1] for c in commands] == ["predict", "generate", "eval", "micro"]
    # plain English, the prompt positional: what a new user types
    assert "'In 1990,'" in commands[1] and "--prompt" not in commands[1]
    assert "1914," in commands[0] and " , " not in text
