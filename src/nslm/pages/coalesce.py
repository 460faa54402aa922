"""Concurrent calls computed together: the explorer's requests share one model pass.

A server thread hands its item to a :class:`Coalescer` and waits. When no batch is being
computed, the thread computes every item waiting at that moment (up to ``max_batch``) in one
call of ``compute_many`` and hands each waiting thread its own result; threads that arrive
meanwhile wait for the next batch. An idle server therefore answers a lone request at once,
and a busy one (a batch ended moments ago) lingers ``linger`` seconds for the requests still
being parsed, then computes them all: one LSTM pass and one call per micro-model for ten
prompts cost far less than ten of each.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Generic, TypeVar

# A batch that ends less than this long before the next call means a server under load. The
# next leader then lingers a moment before taking its batch: the server's event loop needs
# the GIL the last batch held to parse the requests that arrived meanwhile and hand them to
# their threads; without the pause most batches were of one request (measured under 20
# concurrent clients), each paying a whole model pass.
LOADED_WITHIN = 0.05

Item = TypeVar("Item")
Result = TypeVar("Result")


class Coalescer(Generic[Item, Result]):
    """``compute_many(items)`` returns, per item, its result or the exception it raised (an
    item that fails fails alone); an exception from ``compute_many`` itself fails the batch."""

    def __init__(
        self,
        compute_many: Callable[[Sequence[Item]], Sequence[Result | Exception]],
        max_batch: int = 32,
        linger: float = 0.004,
    ) -> None:
        self.compute_many, self.max_batch, self.linger = compute_many, max_batch, linger
        self._waiting: list[tuple[Item, Future]] = []
        self._busy = False
        self._last_end = -math.inf  # when the last batch ended (time.monotonic)
        self._changed = threading.Condition()
        self.batch_sizes: deque[int] = deque(maxlen=1000)  # the last batches' sizes

    def __call__(self, item: Item) -> Result:
        mine: Future = Future()
        with self._changed:
            self._waiting.append((item, mine))
        while True:
            with self._changed:
                self._changed.wait_for(lambda: mine.done() or not self._busy)
                if mine.done():
                    return mine.result()
                self._busy = True
                loaded = time.monotonic() - self._last_end < LOADED_WITHIN
            if loaded:  # let the requests that arrived during the last batch join this one
                time.sleep(self.linger)
            with self._changed:
                batch = self._waiting[: self.max_batch]
                del self._waiting[: self.max_batch]
            try:
                self._compute(batch)
            finally:
                with self._changed:
                    self._busy, self._last_end = False, time.monotonic()
                    self._changed.notify_all()

    def _compute(self, batch: list[tuple[Item, Future]]) -> None:
        self.batch_sizes.append(len(batch))
        try:
            results = self.compute_many([item for item, _ in batch])
        except Exception as exc:  # handed to every waiting request; the server goes on
            results = [exc] * len(batch)
        for (_, future), result in zip(batch, results, strict=True):
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)
