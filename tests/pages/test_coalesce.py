"""The explorer's coalescer (nslm.pages.coalesce): concurrent calls are computed together,
each caller gets its own result, a failing item fails alone and a failing batch leaves the
coalescer working."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest

from nslm.pages.coalesce import Coalescer


def wait_until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the condition never held")
        time.sleep(0.005)


def test_calls_waiting_behind_a_batch_are_computed_as_the_next_one() -> None:
    release = threading.Event()
    seen: list[list[int]] = []

    def squares(items: Sequence[int]) -> list[int]:
        seen.append(list(items))
        release.wait(10)  # the first batch holds the model until the others are queued
        return [x * x for x in items]

    coalescer = Coalescer(squares)
    with ThreadPoolExecutor(5) as pool:
        first = pool.submit(coalescer, 1)
        wait_until(lambda: len(seen) == 1)
        rest = [pool.submit(coalescer, x) for x in (2, 3, 4, 5)]
        wait_until(lambda: len(coalescer._waiting) == 4)
        release.set()
        assert first.result(10) == 1
        assert [f.result(10) for f in rest] == [4, 9, 16, 25]
    assert list(coalescer.batch_sizes) == [1, 4]
    assert sorted(seen[1]) == [2, 3, 4, 5]


def test_a_lone_call_is_computed_at_once_and_batches_are_bounded() -> None:
    coalescer = Coalescer(lambda items: [-x for x in items], max_batch=3)
    assert coalescer(7) == -7
    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(coalescer, range(200)))
    assert got == [-x for x in range(200)]
    assert max(coalescer.batch_sizes) <= 3 and sum(coalescer.batch_sizes) == 201


def test_an_item_that_fails_fails_alone() -> None:
    def halves(items: Sequence[int]) -> list[float | Exception]:
        return [ValueError(f"odd {x}") if x % 2 else x / 2 for x in items]

    coalescer = Coalescer(halves)
    with ThreadPoolExecutor(8) as pool:
        futures = {x: pool.submit(coalescer, x) for x in range(40)}
    for x, future in futures.items():
        if x % 2:
            with pytest.raises(ValueError, match=f"odd {x}"):
                future.result()
        else:
            assert future.result() == x / 2


def test_a_batch_that_raises_fails_its_callers_and_the_next_call_works() -> None:
    broken = [True]

    def compute(items: Sequence[str]) -> list[str]:
        if broken[0]:
            raise RuntimeError("the model broke")
        return [s.upper() for s in items]

    coalescer = Coalescer(compute)
    with pytest.raises(RuntimeError, match="the model broke"):
        coalescer("a")
    broken[0] = False
    assert coalescer("b") == "B"
