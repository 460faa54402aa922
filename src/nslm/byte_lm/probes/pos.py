"""The part-of-speech probes: which neurons of a byte LM know the tag of the byte it reads.

Every byte of a UD EWT sentence is labelled with the XPOS of its word, or ``SPACE`` for the
separator (:func:`nslm.byte_lm.labelled.byte_tags`); its feature is the LSTM cell state after
reading it (:func:`nslm.byte_lm.probes.states.byte_cell_states`, one sentence at a time from a zero
state). One L1 logistic regression per tag, one-vs-rest (:class:`L1Probe`); the predicted tag
is the most probable one (the largest logit). Then, as Carvalho's table, each
tag's classifier is refitted on its own top 1, 2 and 3 neurons by |weight|: accuracy,
precision and recall (weighted over tags, so recall equals accuracy) per k, and per tag the
binary accuracy, precision and recall of its classifier.

Grouping follows Carvalho's project, whose grouped tag set is ``( ) , . CC CD DT IN JJ MD NN NNP PRP
RB TO VB``: plural into singular (NNS → NN, NNPS → NNP), VB* → VB, JJR/JJS → JJ, RBR/RBS →
RB, PRP$ → PRP, -LRB-/-RRB- → ( and ). Other tags stay as they are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from sklearn.metrics import precision_recall_fscore_support

from nslm.byte_lm.data import ARTICLE_END
from nslm.byte_lm.labelled import SPACE, TaggedSentence, byte_tags
from nslm.byte_lm.probes.estimators import L1Probe
from nslm.errors import NslmError

# Nouns, verbs, adjectives, adverbs and pronouns each become one tag (the grouping the
# project's probes are specified with: NN/NNS/NNP/NNPS → NN, VB* → VB, …; Carvalho's keeps NNP
# apart, docs/probes.md)
GROUPS = {
    "NNS": "NN",
    "NNP": "NN",
    "NNPS": "NN",
    "VBD": "VB",
    "VBG": "VB",
    "VBN": "VB",
    "VBP": "VB",
    "VBZ": "VB",
    "JJR": "JJ",
    "JJS": "JJ",
    "RBR": "RB",
    "RBS": "RB",
    "PRP$": "PRP",
    "-LRB-": "(",
    "-RRB-": ")",
}
TOP_KS = (1, 2, 3)
# Fixed: a C search per tag would multiply the fit time (dev-chosen for sentiment). On 60k
# train bytes of the 512-unit LM, grouped tags: 0.748 at C = 0.03, 0.757 at 0.1 (800 test
# sentences; BENCHMARKS.md)
POS_C = 0.1

# (loaded, texts, batch_size=…) → [(n_bytes, H) per text]
ByteExtractor = Callable[..., list[np.ndarray]]


def group_tag(tag: str) -> str:
    return GROUPS.get(tag, tag)


@dataclass
class ByteData:
    """The bytes of some sentences: features, tags, and where each byte came from."""

    X: np.ndarray  # (n_bytes, H) float32 cell states
    tags: np.ndarray  # (n_bytes,) str
    sentence: np.ndarray  # (n_bytes,) index into ``texts``
    texts: list[bytes] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tags)


def take_bytes(
    sentences: Sequence[TaggedSentence], n_bytes: int | None, *, seed: int = 0
) -> list[TaggedSentence]:
    """Whole sentences in a seeded random order until they hold ``n_bytes`` bytes (all when
    None): the probe's training subset."""
    if n_bytes is None:
        return list(sentences)
    order = np.random.default_rng(seed).permutation(len(sentences))
    chosen, total = [], 0
    for i in order:
        if total >= n_bytes:
            break
        chosen.append(sentences[i])
        total += len(byte_tags(sentences[i])[0])
    return chosen


def byte_dataset(
    loaded,
    sentences: Sequence[TaggedSentence],
    *,
    grouped: bool = True,
    batch_size: int = 64,
    frame: bool = True,
    extractor: ByteExtractor | None = None,
) -> ByteData:
    """Cell state and tag of every byte of ``sentences``, each read after the review
    separator when ``frame``."""
    if not sentences:
        raise NslmError("empty split: the POS probe needs sentences")
    if extractor is None:
        from nslm.byte_lm.probes.states import byte_cell_states as extractor
    texts, tags = zip(*(byte_tags(s) for s in sentences), strict=True)
    prefix = ARTICLE_END if frame else b""
    states = extractor(loaded, [prefix + t for t in texts], batch_size=batch_size)
    states = [state[len(prefix) :] for state in states]
    for text, state in zip(texts, states, strict=True):
        if len(state) != len(text):
            raise NslmError(f"the extractor gave {len(state)} states for {len(text)} bytes")
    flat = [group_tag(t) if grouped else t for row in tags for t in row]
    return ByteData(
        X=np.concatenate(states).astype(np.float32, copy=False),
        tags=np.asarray(flat),
        sentence=np.repeat(np.arange(len(texts)), [len(t) for t in texts]),
        texts=list(texts),
    )


@dataclass
class PosResult:
    summary: dict
    probes: dict[str, L1Probe] = field(default_factory=dict)  # "all", "1", "2", "3"


def _scores(pred: np.ndarray, gold: np.ndarray) -> dict:
    precision, recall, _, _ = precision_recall_fscore_support(
        gold, pred, average="weighted", zero_division=0
    )
    return {
        "acc": float(np.mean(pred == gold)),
        "precision": float(precision),
        "recall": float(recall),
    }


def _binary(scores: np.ndarray, gold: np.ndarray) -> dict:
    """One tag's classifier alone: tag vs the rest."""
    pred = scores > 0
    tp = int(np.sum(pred & gold))
    return {
        "acc": float(np.mean(pred == gold)),
        "precision": tp / max(int(pred.sum()), 1),
        "recall": tp / max(int(gold.sum()), 1),
    }


def _per_tag(probe: L1Probe, test: ByteData) -> dict[str, dict]:
    scores = probe.decision_function(test.X)
    return {
        str(tag): _binary(scores[:, row], test.tags == tag)
        for row, tag in enumerate(probe.classes_)
    }


def probe_pos(
    train: ByteData,
    test: ByteData,
    *,
    C: float = POS_C,
    ks: Sequence[int] = TOP_KS,
    log: Callable[[str], None] = lambda _: None,
) -> PosResult:
    """Fit the one-vs-rest probes (all neurons, then each tag's top-k) and score them on test."""
    if len(train) == 0 or len(test) == 0:
        raise NslmError("empty split: the POS probe needs bytes in train and test")
    counts = Counter(train.tags.tolist())
    if len(counts) < 3:
        raise NslmError(f"the POS probe needs three tags at least; train has {sorted(counts)}")
    log(f"POS probe: {len(train):,} train bytes, {len(counts)} tags, all neurons (C={C})")
    full = L1Probe(C=C).fit(train.X, train.tags)
    probes = {"all": full}
    for k in ks:
        log(f"POS probe: each tag's top {k} neuron{'s' * (k > 1)}")
        probes[str(k)] = full.restricted(k).fit(train.X, train.tags)
    rows = {name: _scores(probe.predict(test.X), test.tags) for name, probe in probes.items()}
    per_tag = {str(tag): {"neurons": full.top_neurons(3, tag).tolist()} for tag in full.classes_}
    for name, probe in probes.items():
        for tag, scores in _per_tag(probe, test).items():
            per_tag[tag][name] = scores
    top = counts.most_common(1)[0][0]
    summary = {
        "train_bytes": len(train),
        "train_sentences": len(train.texts),
        "test_bytes": len(test),
        "test_sentences": len(test.texts),
        "C": C,
        "n_nonzero": full.n_nonzero(),
        "tags": dict(counts.most_common()),
        "majority": {"tag": top, "test_acc": float(np.mean(test.tags == top))},
        "rows": rows,
        "per_tag": per_tag,
    }
    if SPACE in per_tag and "3" in per_tag[SPACE]:
        summary["space_top3_acc"] = per_tag[SPACE]["3"]["acc"]
    for name, row in rows.items():
        log(
            f"POS k={name}: acc {row['acc']:.3f} prec {row['precision']:.3f} "
            f"recall {row['recall']:.3f}"
        )
    return PosResult(summary, probes)
