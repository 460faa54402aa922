"""The battery's world, built once per session (robustness.world: synthetic, no corpus)."""

from __future__ import annotations

import pytest

from robustness.world import World, build_world


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return build_world(tmp_path_factory.mktemp("robustness-world"))
