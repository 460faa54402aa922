"""Corpus location order (README, "Where corpora come from") and the verified download,
against a loopback server."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from nslm.data import locate
from nslm.data.locate import CorpusSpec, SplitFile, locate_corpus
from nslm.errors import NslmError

TEXT = " \n = Tiny = \n \n It rained in 1990 . \n"


@pytest.fixture
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("NSLM_DATA_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    root = tmp_path / "served"
    root.mkdir()
    for split in ("train", "valid", "test"):
        (root / f"{split}.txt").write_text(TEXT)
    (root / "bad.txt").write_text(TEXT + "tampered")
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None  # type: ignore[method-assign]
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


def tiny_spec(base_url: str, bad_split: str | None = None) -> CorpusSpec:
    digest = hashlib.sha256(TEXT.encode()).hexdigest()
    return CorpusSpec(
        name="tiny",
        splits={
            s: SplitFile(
                names=(f"{s}.txt",),
                url=base_url + ("bad.txt" if s == bad_split else f"{s}.txt"),
                sha256=digest,
            )
            for s in ("train", "valid", "test")
        },
    )


def test_explicit_directory_wins(tmp_path: Path) -> None:
    for s in ("train", "valid", "test"):
        (tmp_path / f"wiki.{s}.tokens").write_text(TEXT)
    found = locate_corpus(tmp_path)
    assert found["valid"] == tmp_path / "wiki.valid.tokens"


def test_data_dir_then_user_cache(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    monkeypatch.setitem(locate.KNOWN_CORPORA, "tiny", tiny_spec(server))
    cache_copy = isolated_env / "xdg" / "nslm" / "tiny"
    cache_copy.mkdir(parents=True)
    for s in ("train", "valid", "test"):
        (cache_copy / f"{s}.txt").write_text(TEXT)
    assert locate_corpus("tiny")["train"] == cache_copy / "train.txt"
    data_dir = isolated_env / "data"
    (data_dir / "tiny").mkdir(parents=True)
    for s in ("train", "valid", "test"):
        (data_dir / "tiny" / f"{s}.txt").write_text(TEXT)
    monkeypatch.setenv("NSLM_DATA_DIR", str(data_dir))
    assert locate_corpus("tiny")["train"] == data_dir / "tiny" / "train.txt"


def test_download_is_verified_and_cached(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    monkeypatch.setitem(locate.KNOWN_CORPORA, "tiny", tiny_spec(server))
    found = locate_corpus("tiny")
    assert found["test"].read_text() == TEXT
    assert found["test"].parent == isolated_env / "xdg" / "nslm" / "tiny"


def test_download_with_wrong_checksum_is_refused(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch, server: str
) -> None:
    monkeypatch.setitem(locate.KNOWN_CORPORA, "tiny", tiny_spec(server, bad_split="valid"))
    with pytest.raises(NslmError, match="SHA-256"):
        locate_corpus("tiny")
    folder = isolated_env / "xdg" / "nslm" / "tiny"
    assert not (folder / "valid.txt").exists()
    assert not list(folder.glob(".*part"))  # no half-written download left


def test_offline_download_names_where_to_put_files(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # port 9 (discard) on loopback refuses connections: what "no network" looks like
    monkeypatch.setitem(locate.KNOWN_CORPORA, "tiny", tiny_spec("http://127.0.0.1:9/"))
    with pytest.raises(NslmError) as err:
        locate_corpus("tiny")
    message = str(err.value)
    assert "\n" not in message
    assert "NSLM_DATA_DIR" in message and "train.txt" in message


def test_unknown_name_lists_known_corpora(isolated_env: Path) -> None:
    with pytest.raises(NslmError, match="wikitext-2"):
        locate_corpus("wikitext-9")
