"""Shared fixtures, the ``realdata`` mark, and no downloads.

Real data: tests that read the corpora need ``$NSLM_DATA_DIR`` with ``wikitext-2`` (CI sets it
to ../shared/data). Every test that uses a data fixture (``data_dir``, ``wt2_all``, the tiny
runs, … — anything that depends on ``data_dir``) gets the ``realdata`` mark at collection, and
every ``realdata`` test is skipped when the data is missing, so ``pytest -m "not realdata"`` is
the data-free suite and a plain ``pytest`` without the data skips instead of failing. A test
that reads the data without a fixture carries ``@pytest.mark.realdata`` itself.

No downloads: ``nslm.data.locate`` fetches a corpus it cannot find on disk. In tests a fetch
from anywhere but loopback (test_locate's own server) is a skip, and subprocesses get an
unreachable proxy, so a missing mark shows as a fast error, never as a hang or a download.

The tiny NSLM run (``tiny_nslm_run``) is trained once per session; tests that write into a run
take ``tiny_nslm_copy`` (or copy it with ``helpers.copy_run``).

A test module that scores a run says which with a ``run`` fixture; the chain from it is here:
``loaded`` (the run loaded) → ``micro`` (its micro-models) → ``test_slice`` (the first
``SLICE`` tokens of its test split, ``SLICE`` being the module's constant).
"""

from __future__ import annotations

import os
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import (
    TINY_MICRO_CLASSES,
    copy_run,
    train_tiny_byte_lm,
    train_tiny_nslm,
    write_labelled_data,
)
from nslm.data import PreparedCorpus, prepare_corpus
from nslm.runs.load import load_run
from nslm.runs.micro import load_run_micro
from nslm.scores.passes import head_of

NO_DATA = "needs $NSLM_DATA_DIR with wikitext-2 (CI sets it)"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
UNREACHABLE_PROXY = "http://127.0.0.1:9"  # the discard port: connections are refused

# The old spelling of the mark (``from conftest import requires_data``); use realdata.
requires_data = pytest.mark.realdata


def _data_dir() -> Path | None:
    env = os.environ.get("NSLM_DATA_DIR")
    if env and (Path(env) / "wikitext-2").is_dir():
        return Path(env)
    return None


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    have_data = _data_dir() is not None
    for item in items:
        if "data_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.realdata)
        if not have_data and item.get_closest_marker("realdata") is not None:
            item.add_marker(pytest.mark.skip(reason=NO_DATA))


@pytest.fixture(scope="session", autouse=True)
def _no_downloads() -> Iterator[None]:
    real_urlopen = urllib.request.urlopen

    def urlopen(url, *args, **kwargs):
        target = url if isinstance(url, str) else url.full_url
        if urllib.parse.urlsplit(target).hostname not in LOOPBACK:
            pytest.skip(f"would download {target}: {NO_DATA}; mark the test realdata")
        return real_urlopen(url, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(urllib.request, "urlopen", urlopen)
        for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
            mp.setenv(var, UNREACHABLE_PROXY)
        for var in ("no_proxy", "NO_PROXY"):
            mp.setenv(var, ",".join(sorted(LOOPBACK)))
        yield


# -- the corpora ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def data_dir() -> Path:
    found = _data_dir()
    if found is None:
        pytest.skip(NO_DATA)
    return found


@pytest.fixture(scope="session")
def prepared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One prepared-corpus cache for the whole test session (each prepare takes seconds)."""
    return tmp_path_factory.mktemp("prepared")


def _prepare(classes: str, cache: Path) -> PreparedCorpus:
    return prepare_corpus("wikitext-2", classes, cache_root=cache)


@pytest.fixture(scope="session")
def wt2_all(data_dir: Path, prepared_cache: Path) -> PreparedCorpus:
    """WikiText-2 with number and place classes."""
    return _prepare("all", prepared_cache)


@pytest.fixture(scope="session")
def wt2_numbers(data_dir: Path, prepared_cache: Path) -> PreparedCorpus:
    return _prepare("numbers", prepared_cache)


@pytest.fixture(scope="session")
def wt2_places(data_dir: Path, prepared_cache: Path) -> PreparedCorpus:
    return _prepare("places", prepared_cache)


# -- the tiny NSLM runs ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def tiny_nslm_run(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """The tiny NSLM run of the session (``helpers.train_tiny_nslm``: configs/tiny.toml, 40
    steps, fast micro-models for ``TINY_MICRO_CLASSES``), trained once. Read only: a test
    that writes into a run takes ``tiny_nslm_copy``."""
    return train_tiny_nslm(tmp_path_factory.mktemp("tiny-nslm") / "tiny", TINY_MICRO_CLASSES)


@pytest.fixture(scope="session")
def tiny_nslm_shared_top_run(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """``tiny_nslm_run`` with ``hnlm_top = "shared"`` (the HNLM top level is the NNLM's
    softmax), trained once, only if a test asks for it. Read only."""
    root = tmp_path_factory.mktemp("tiny-nslm-shared")
    return train_tiny_nslm(root / "tiny", TINY_MICRO_CLASSES, ("hnlm_top='shared'",))


TOP_RUNS = {"separate": "tiny_nslm_run", "shared": "tiny_nslm_shared_top_run"}


@pytest.fixture(scope="module", params=list(TOP_RUNS))
def tiny_nslm_each_top(request: pytest.FixtureRequest, data_dir: Path) -> Path:
    """The session's tiny run for each HNLM top level (``separate``, the default, and
    ``shared``): parametrises the tests of a module that uses it. Read only."""
    return request.getfixturevalue(TOP_RUNS[request.param])


@pytest.fixture(scope="session")
def tiny_byte_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny byte LM (``helpers.train_tiny_byte_lm``: 32 units, 40 steps on a synthetic
    ``bytes:DIR`` corpus), trained once; no corpus needed. Read only."""
    return train_tiny_byte_lm(tmp_path_factory.mktemp("tiny-byte"))


@pytest.fixture(scope="session")
def open_run_dir(tiny_nslm_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tiny run with RUN/open.json as 'nslm micro fit RUN' writes it, for
    ``<year>`` alone: the other classes keep their micro-models, and the open fit of
    ``<convert>`` (every number spelling) takes minutes. Fitted once a session; read only."""
    from nslm.runs.load import load_run
    from nslm.runs.micro import load_run_micro
    from nslm.runs.open_micro import fit_run_open, write_run_open

    run = copy_run(tiny_nslm_run, tmp_path_factory.mktemp("open") / "tiny")
    loaded = load_run(run)
    write_run_open(loaded, fit_run_open(loaded, {"year": load_run_micro(loaded)["year"]}))
    return run


@pytest.fixture
def tiny_nslm_copy(tiny_nslm_run: Path, tmp_path: Path) -> Path:
    """A private copy of ``tiny_nslm_run`` for a test that writes into the run."""
    return copy_run(tiny_nslm_run, tmp_path / "tiny")


@pytest.fixture
def labelled_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$NSLM_DATA_DIR with small synthetic sst2/ and ud-english-ewt/ folders."""
    root = write_labelled_data(tmp_path / "data")
    monkeypatch.setenv("NSLM_DATA_DIR", str(root))
    return root


@pytest.fixture(scope="module")
def loaded(run: Path):
    """The module's ``run``, loaded once per module."""
    return load_run(run)


@pytest.fixture(scope="module")
def micro(loaded):
    return load_run_micro(loaded)


@pytest.fixture(scope="module")
def test_slice(loaded, request: pytest.FixtureRequest):
    """The first ``SLICE`` tokens (the module's constant) of the run's test split."""
    return head_of(loaded.corpus.test, request.module.SLICE)
