"""A prompt as the model reads it: plain text tokenized by the run's rules
(:mod:`nslm.data.text`), then prepared as the corpus was (numbers re-joined, places chunked,
classes tagged: :func:`nslm.data.tagging.tag_lines`), as a one-article :class:`Split` with one
slot for the token to predict; several prompts as one split (:class:`PromptBatch`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nslm.config import class_rules_of
from nslm.data.conversions import MAX_TARGET_UNITS, pending_conversion, unit_map_from_json
from nslm.data.corpus import Split
from nslm.data.tagging import alternate_names_of, tag_lines
from nslm.data.text import prompt_line
from nslm.errors import NslmError
from nslm.runs.load import LoadedRun


def prompt_split(
    loaded: LoadedRun, prompt: str, unit_map: dict | None = None, input_format: str = "plain"
) -> tuple[Split, list[str]]:
    """The prompt as a one-article :class:`Split`, plus one slot for the token to predict
    (``unit_map``: the corpus's conversions, when the caller has read them already).

    ``input_format``: ``plain`` text is tokenized by the run's rules (:mod:`nslm.data.text`:
    "in 1914, and" reads as ``in 1914 , and``); ``tokenized`` text is read as it is."""
    corpus, cfg = loaded.corpus, loaded.cfg
    if unit_map is None:
        unit_map = unit_map_from_json(corpus.meta.get("unit_map", {}))
    if not prompt.strip():
        raise NslmError("the prompt is empty")
    line = prompt_line(prompt, loaded.text_form, input_format)
    if not line.strip():
        raise NslmError("the prompt has no tokens")
    naming = alternate_names_of(corpus.meta)
    tagged = tag_lines([line], cfg.classes, class_rules_of(cfg), alternate_names=naming)
    tokens = tagged.tokens[:-1]  # drop the <eos> tag_lines ends every line with
    classes, values = tagged.classes[:-1], tagged.values[:-1]
    coords = np.column_stack([tagged.lats[:-1], tagged.lons[:-1]]) if tokens else np.zeros((0, 2))
    n = len(tokens) + 1  # + the next position
    stoi, unk = corpus.vocab.stoi, corpus.vocab.unk_id
    ids = np.array([stoi.get(t, unk) for t in tokens] + [unk], dtype=np.int32)
    rule = np.array([corpus.class_names.index(c) for c in classes] + [0], dtype=np.int16)
    convert = np.full((n, MAX_TARGET_UNITS), math.nan)  # only the next slot is ever scored
    convert[-1] = pending_conversion(tokens, unit_map)
    split = Split(
        name="prompt",
        token_ids=ids,
        rule_class_ids=rule,
        values=np.array([*values, math.nan], dtype=np.float64),
        coords=np.vstack([coords, [[math.nan, math.nan]]]).reshape(n, 2),
        convert_targets=convert,
        article_ids=np.zeros(n, dtype=np.int32),
        unk_id=unk,
    )
    return split, tokens


def oov_words(loaded: LoadedRun, tokens: list[str]) -> list[str]:
    """The prompt's tokens outside the run's vocabulary (the LM reads each as ``<unk>``)."""
    stoi = loaded.corpus.vocab.stoi
    return list(dict.fromkeys(t for t in tokens if t not in stoi))


@dataclass
class PromptBatch:
    """Several prompts as one :class:`Split`, one article each (so no micro-model context
    crosses from one prompt into the next), each followed by its next slot."""

    split: Split
    tokens: list[list[str]]  # each prompt's prepared tokens
    slots: np.ndarray  # where each prompt's next slot is in ``split``

    def __len__(self) -> int:
        return len(self.tokens)


def prompt_batch(
    loaded: LoadedRun, prompts: Sequence[str], input_format: str = "plain"
) -> PromptBatch:
    """:func:`prompt_split` of every prompt, joined."""
    unit_map = unit_map_from_json(loaded.corpus.meta.get("unit_map", {}))
    parts = [prompt_split(loaded, p, unit_map, input_format) for p in prompts]
    splits = [s for s, _ in parts]
    joined = Split(
        name="prompts",
        token_ids=np.concatenate([s.token_ids for s in splits]),
        rule_class_ids=np.concatenate([s.rule_class_ids for s in splits]),
        values=np.concatenate([s.values for s in splits]),
        coords=np.concatenate([s.coords for s in splits]),
        convert_targets=np.concatenate([s.convert_targets for s in splits]),
        article_ids=np.repeat(np.arange(len(splits), dtype=np.int32), [len(s) for s in splits]),
        unk_id=splits[0].unk_id,
    )
    slots = np.cumsum([len(s) for s in splits]) - 1
    return PromptBatch(joined, [t for _, t in parts], slots)
