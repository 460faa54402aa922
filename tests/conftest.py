"""Shared fixtures. Real-data tests need $NSLM_DATA_DIR (CI sets it to ../shared/data)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nslm.data import PreparedCorpus, prepare_corpus


def _data_dir() -> Path | None:
    env = os.environ.get("NSLM_DATA_DIR")
    if env and (Path(env) / "wikitext-2").is_dir():
        return Path(env)
    return None


requires_data = pytest.mark.skipif(
    _data_dir() is None, reason="needs $NSLM_DATA_DIR with wikitext-2 (CI sets it)"
)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    found = _data_dir()
    if found is None:
        pytest.skip("needs $NSLM_DATA_DIR with wikitext-2")
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
