"""keep_freed_memory: a freed large tensor stays in the heap for reuse, not unmapped.

Each check runs in a fresh interpreter: the setting is process-wide and one-way. glibc's
own accounting (mallinfo2) tells where a block lives, which page-fault counts on a virtual
machine do not tell reliably.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

PROBE = """
import ctypes, json, sys
import torch
from nslm.training.memory import keep_freed_memory


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
applied = keep_freed_memory() if sys.argv[1] == "keep" else None
x = torch.ones(700, 35316)  # ~99 MB: the full-softmax logits of a 20×35 batch
held = libc.mallinfo2()
del x
freed = libc.mallinfo2()
print(json.dumps({"applied": applied, "mmapped_while_held": held.hblkhd,
                  "heap_after_free": freed.arena, "free_in_heap": freed.fordblks}))
"""

BLOCK = 700 * 35316 * 4


def _probe(mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


GLIBC = platform.libc_ver()[0] == "glibc" and tuple(
    int(x) for x in (platform.libc_ver()[1] or "0.0").split(".")[:2]
) >= (2, 33)


@pytest.mark.skipif(not GLIBC, reason="glibc ≥ 2.33 (mallopt, mallinfo2)")
def test_freed_blocks_stay_in_the_heap_for_reuse() -> None:
    default = _probe("default")
    kept = _probe("keep")
    assert kept["applied"] is True
    # glibc's default serves a block this large with mmap and unmaps it on free, so the
    # next step faults it in again page by page.
    assert default["mmapped_while_held"] >= BLOCK
    assert default["heap_after_free"] < BLOCK
    # Kept: the block came from the heap and stays there, free for the next step.
    assert kept["mmapped_while_held"] < BLOCK
    assert kept["heap_after_free"] >= BLOCK
    assert kept["free_in_heap"] >= BLOCK
