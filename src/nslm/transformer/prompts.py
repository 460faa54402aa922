"""A prompt as a run's corpus reads it, with a placeholder word for the next slot: what the
micro-models and the functions read at a prompt's end (``predict``, generation)."""

from __future__ import annotations

import collections
from typing import Any

from nslm.data.fixed_vocab import prepare_text

_PREPARED: collections.OrderedDict = collections.OrderedDict()


def prepared_slot(corpus: Any, text: str) -> Any:
    """``text`` prepared as the corpus was, with a placeholder word for the next slot (the
    micro-models and the functions read the same preparation; generation asks for it at
    every root, so the last few are kept)."""
    key = (id(corpus), text)
    if key not in _PREPARED:
        prepared = prepare_text(corpus, text + " x", name="prompt", source="<prompt>")
        _PREPARED[key] = (corpus, prepared)  # the corpus kept: its id is not reused
        while len(_PREPARED) > 4:
            _PREPARED.popitem(last=False)
    return _PREPARED[key][1]
