"""Pieces of benchmarks/table4.py: its held-out prompts, UD English EWT test as plain text, and
the value figures (MAPE, MdAPE, MdAE of the predicted numeral) of the run's word models."""

from __future__ import annotations

import numpy as np

from nslm.data.numbers import NUMBER_CLASSES
from nslm.evaluation.numeral_values import predicted_values
from nslm.evaluation.value_metrics import baseline_metrics, value_metrics
from text import DATA, read_conllu

# Held-out prompts, written for this benchmark: an unseen year, count or place as the
# previous token of its class, then the slot where the next one goes.
PROMPTS = [
    "Construction began in 2027 and ended in",
    "The tower was designed in 2031, and its second phase opened in",
    "The first edition appeared in 2019; the second followed in",
    "The town had 12,480 inhabitants in 1990 and",
    "The stadium holds 48,315 spectators, up from",
    "The expedition left Gujranwala for",
    "After a season in Zhanjiang, the band toured",
    "The festival moved from Bhopal to",
]


def ewt_text() -> str:
    """UD English EWT test's ``# text =`` lines, one sentence a line: plain text."""
    sentences = read_conllu(DATA / "ud-english-ewt" / "test.conllu.xz")
    return "\n".join(text for text, _ in sentences) + "\n"


def value_figures(scorer, split, corpus, micro: dict, open_classes: dict, lams: dict) -> dict:
    """Per word model: MAPE, MdAPE, MdAE of the mode over the vocabulary's numerals at every
    test numeral (a position > 0), with the train mean and median as baselines."""
    names = corpus.class_names
    numeral_ids = [names.index(c) for c in NUMBER_CLASSES if c in names]
    positions = np.flatnonzero(np.isin(split.rule_class_ids, numeral_ids))
    positions = positions[positions > 0]
    models = {
        "NSLM": (micro["plain"], lams["NSLM"], None),
        "NSLM-open": (micro["plain"], lams["NSLM-open"], open_classes),
    }
    if "context" in micro:
        models["NSLM-context"] = (micro["context"], lams["NSLM-context"], None)
        models["NSLM-context-open"] = (micro["context"], lams["NSLM-context-open"], open_classes)
    predicted = predicted_values(scorer, split, positions, corpus.vocab.itos, names, models)
    gold = split.values[positions]
    out = {m: value_metrics(gold, pred) for m, pred in predicted.items()}
    train = corpus.train
    train_values = train.values[np.isin(train.rule_class_ids, numeral_ids)]
    out["baselines"] = baseline_metrics(gold, train_values.mean(), np.median(train_values))
    return out
