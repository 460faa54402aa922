"""The data CLI as a user meets it: exit codes, one-line errors, JSON output, the cache."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import assert_one_line_error, make_corpus, run_cli
from nslm.data import PreparedCorpus, prepare_corpus


@pytest.mark.parametrize(
    ("train", "needle"),
    [
        (b"", "empty"),
        (b"\x00\x01\x02binary\x00data", "binary"),
        (" caf\u00e9 ".encode("latin-1"), "not UTF-8"),
    ],
    ids=["empty", "binary", "non-utf8"],
)
def test_bad_corpus_files_exit_2_with_one_line(tmp_path: Path, train: bytes, needle: str) -> None:
    corpus = make_corpus(tmp_path / "corpus", train)
    cache = tmp_path / "cache"
    result = run_cli("data", "prepare", "--corpus", str(corpus), "--prepared-dir", str(cache))
    assert_one_line_error(result, needle, "train.txt")
    assert not cache.exists() or not any(cache.iterdir())


def test_missing_path_exits_2(tmp_path: Path) -> None:
    result = run_cli("data", "prepare", "--corpus", str(tmp_path / "nowhere"))
    assert_one_line_error(result, "no such corpus or directory")


def test_directory_without_split_files_exits_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert_one_line_error(
        run_cli("data", "stats", "--corpus", str(tmp_path / "empty")), "train.txt"
    )


def test_unknown_option_and_class_choice_exit_2(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("data", "prepare", "--classes", "colours"), "--classes")
    assert_one_line_error(run_cli("data", "prepare", "--no-such-flag"), "--no-such-flag")


def test_help_on_every_data_command() -> None:
    for args in (
        ["--help"],
        ["data", "--help"],
        ["data", "prepare", "--help"],
        ["data", "stats", "--help"],
    ):
        result = run_cli(*args)
        assert result.returncode == 0 and "Usage:" in result.stdout


def test_small_corpus_prepare_and_stats_json(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    cache = tmp_path / "cache"
    out = tmp_path / "stats.json"
    result = run_cli(
        "data",
        "stats",
        "--corpus",
        str(corpus),
        "--prepared-dir",
        str(cache),
        "--json",
        "-o",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats == json.loads(out.read_text())
    assert stats["train"]["classes"]["year"] == {"tokens": 2, "types": 2, "oov": 0}
    assert stats["train"]["classes"]["city"] == {"tokens": 1, "types": 1, "oov": 0}


def test_real_stats_json_schema(data_dir: Path, prepared_cache: Path) -> None:
    result = run_cli(
        "data", "stats", "--corpus", "wikitext-2", "--json", "--prepared-dir", str(prepared_cache)
    )
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    for split in ("train", "valid", "test"):
        classes = stats[split]["classes"]
        assert set(classes) == {
            "year",
            "day",
            "round",
            "decimal",
            "range",
            "convert",
            "other",
            "city",
            "state",
            "country",
        }
        for row in classes.values():
            assert set(row) == {"tokens", "types", "oov"}
            assert row["types"] <= row["tokens"]
        assert all(classes[c]["oov"] == 0 for c in classes) == (split == "train")


def test_interrupted_prepare_leaves_no_trusted_entry(data_dir: Path, tmp_path: Path) -> None:
    """SIGKILL a prepare while it writes its cache entry; a later run must rebuild cleanly."""
    cache = tmp_path / "cache"
    for _attempt in range(5):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "nslm",
                "data",
                "prepare",
                "--corpus",
                "wikitext-2",
                "--classes",
                "numbers",
                "--prepared-dir",
                str(cache),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        killed_mid_write = False
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if cache.is_dir() and any(p.name.startswith(".tmp-") for p in cache.iterdir()):
                proc.send_signal(signal.SIGKILL)
                killed_mid_write = True
                break
            time.sleep(0.002)
        proc.wait()
        if killed_mid_write:
            break
        for entry in cache.iterdir():  # it finished first: start over
            subprocess.run(["rm", "-rf", str(entry)], check=True)
    assert killed_mid_write, "never caught the prepare while it was writing"
    trusted = [p for p in cache.iterdir() if not p.name.startswith(".")]
    assert trusted == []
    fresh = prepare_corpus("wikitext-2", "numbers", cache_root=cache)
    assert not any(p.name.startswith(".tmp-") for p in cache.iterdir())  # stale one removed
    reloaded = PreparedCorpus.load(cache / fresh.meta["cache_key"])
    for name in ("train", "valid", "test"):
        np.testing.assert_array_equal(reloaded.splits[name].token_ids, fresh.splits[name].token_ids)
        np.testing.assert_array_equal(
            reloaded.splits[name].rule_class_ids, fresh.splits[name].rule_class_ids
        )
