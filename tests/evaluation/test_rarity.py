"""Perplexity by rarity (Figure 3) on the real WikiText-2 class tokens."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from nslm.data import PreparedCorpus
from nslm.evaluation import class_perplexities
from nslm.evaluation.rarity import BUCKETS, plot_rarity, rarity_table


def test_buckets_partition_the_class_tokens(wt2_places: PreparedCorpus, tmp_path: Path) -> None:
    split = wt2_places.test
    uniform = np.full(len(split), -math.log(100.0))
    uniform[0] = np.nan
    # a "model" that knows the training counts: rarer tokens get lower probability
    counts = wt2_places.vocab.counts[split.token_ids].astype(float)
    by_count = np.log(np.clip(counts, 1, None) / counts.sum())
    by_count[0] = np.nan
    table = rarity_table({"uniform": uniform, "unigram": by_count}, split, wt2_places)
    assert list(table) == [b[0] for b in BUCKETS]
    total = sum(table[b]["uniform"]["tokens"] for b in table)
    assert total == class_perplexities(uniform, split, wt2_places)["Locations"]["tokens"]
    for bucket in table:
        if table[bucket]["uniform"]["tokens"]:
            assert table[bucket]["uniform"]["ppl"] == pytest.approx(100.0)
    ppl = [table[b]["unigram"]["ppl"] for b in table if table[b]["unigram"]["tokens"]]
    assert ppl == sorted(ppl, reverse=True)  # rarer buckets are harder for a unigram
    out = tmp_path / "rarity.png"
    plot_rarity(table, out, "test")
    assert out.stat().st_size > 5_000
