"""Per-class, per-split statistics of a prepared corpus (``nslm data stats``)."""

from __future__ import annotations

import numpy as np

from nslm.data.corpus import PreparedCorpus


def corpus_stats(corpus: PreparedCorpus) -> dict:
    """Token, type and out-of-vocabulary counts for every class and split.

    ``oov`` counts class tokens (by rule) whose type is not in the training vocabulary;
    they become ``<unk>`` words for modelling and are left out of per-class perplexities.
    Types of OOV tokens are not recoverable from ids, so ``types`` counts in-vocabulary types.
    """
    out: dict = {
        "corpus": corpus.meta.get("source"),
        "classes_option": corpus.meta.get("classes_option"),
        "vocab_size": len(corpus.vocab),
        "class_vocab_sizes": {
            name: len(corpus.class_vocab(name)) for name in corpus.class_names[1:]
        },
    }
    for split_name, split in corpus.splits.items():
        classes = {}
        oov = split.oov_class_mask
        for cid, name in enumerate(corpus.class_names):
            if cid == 0:
                continue
            mask = split.rule_class_ids == cid
            in_vocab = split.token_ids[mask & ~oov]
            classes[name] = {
                "tokens": int(mask.sum()),
                "types": len(np.unique(in_vocab)),
                "oov": int((mask & oov).sum()),
            }
        out[split_name] = {
            "tokens": len(split),
            "articles": len(np.unique(split.article_ids)),
            "classes": classes,
        }
    out["ambiguous_places"] = corpus.meta.get("ambiguous_places", {})
    return out
