"""Scoring a trained numeral model (models/numerals.py) at the numerals of a split, as
Spithourakis & Riedel (2018) report them (Table 4): perplexity on numerals and value
prediction.

Positions: every token whose rule class is a number class, in or out of the run's
vocabulary, the LSTM reading the whole split as the NNLM's evaluation does (one state per
stream, carried). Two perplexity conventions:

* ``adjusted`` — every numeral counts. A numeral a closed model maps to <unk_num> is charged
  P(<unk_num> | h) / |U|, U the distinct such types in the scored text (Ueberla's adjusted
  perplexity, as their release). The open-vocabulary branches (d-RNN, MoG, the combination's
  d-RNN) score the string itself.
* ``in_vocab`` — only positions whose token is in the run's training vocabulary
  (``token_ids != unk_id``): the same positions for every model, and for the NNLM.

A token outside the run's vocabulary is <unk> in ``token_ids``, so its string comes from
re-tagging the split's text (:func:`split_tokens`); the LSTM reads such a token as the word
<unk>, as the NNLM does (their release would read its digits).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from nslm.data.numbers import NUMBER_CLASSES
from nslm.data.prepare import split_lines
from nslm.data.tagging import tag_lines
from nslm.data.textfile import read_text
from nslm.errors import NslmError
from nslm.evaluation.value_metrics import baseline_metrics, value_metrics
from nslm.models.numerals import NumeralHead, Targets, numeral_targets
from nslm.runs.load import LoadedRun

ROWS_PER_CHUNK = 16  # states scored against every candidate at once (d-RNN: 16 × ~1,700)


def split_tokens(loaded: LoadedRun, split: str) -> list[str]:
    """The token strings of ``split`` as the run's preparation tagged them: aligned with the
    split's arrays, out-of-vocabulary tokens included."""
    from nslm.data.locate import locate_corpus

    cfg = loaded.cfg
    path = locate_corpus(cfg.corpus, download=False)[split]
    rules = tuple(loaded.corpus.class_rules.values())
    tokens = tag_lines(split_lines(read_text(path)), cfg.classes, rules).tokens
    if len(tokens) != len(loaded.corpus.splits[split]):
        raise NslmError(f"{path} does not match the prepared {split} split")
    return tokens


@dataclass
class NumeralScores:
    """Per numeral position of a split (all arrays aligned with ``positions``)."""

    split: str
    positions: np.ndarray  # positions in the split
    tokens: list[str]
    log_prob: np.ndarray  # natural log, the adjusted convention
    in_vocab: np.ndarray  # bool: the token is in the run's vocabulary
    unk: np.ndarray  # bool: charged P(<unk_num>) / |U|
    gold: np.ndarray  # the token's value
    predicted: np.ndarray  # the mode of the model's distribution over the candidates
    train_mean: float
    train_median: float

    def summary(self) -> dict:
        """The one-call figures: numeral perplexities, value metrics, counts."""
        values = value_metrics(self.gold, self.predicted)
        return {
            "split": self.split,
            "num_ppl_adjusted": math.exp(-self.log_prob.mean()),
            "num_ppl_in_vocab": math.exp(-self.log_prob[self.in_vocab].mean()),
            "mape": values["mape"],
            "mdape": values["mdape"],
            "mdae": values["mdae"],
            "n_tokens": len(self.positions),
            "n_in_vocab": int(self.in_vocab.sum()),
            "n_unk_num": int(self.unk.sum()),
            "unk_num_types": len({t for t, u in zip(self.tokens, self.unk, strict=True) if u}),
            "n_zero_gold": values["n_zero"],
            "baselines": baseline_metrics(self.gold, self.train_mean, self.train_median),
        }


def numeral_positions(loaded: LoadedRun, split: str) -> np.ndarray:
    """Positions whose rule class is a number class (position 0 has no history: unscored)."""
    names = loaded.corpus.class_names
    ids = [names.index(c) for c in NUMBER_CLASSES if c in names]
    at = np.flatnonzero(np.isin(loaded.corpus.splits[split].rule_class_ids, ids))
    return at[at > 0]


@torch.no_grad()
def score_numerals(loaded: LoadedRun, split: str) -> NumeralScores:
    """Score every numeral of ``split`` ("valid" or "test") under the run's numeral model."""
    if "numeral" not in loaded.model.heads:
        raise NslmError(f"{loaded.run_dir} has no numeral model (heads = {loaded.cfg.heads})")
    head: NumeralHead = loaded.model.heads["numeral"]
    data = loaded.corpus.splits[split]
    at = numeral_positions(loaded, split)
    tokens = split_tokens(loaded, split)
    strings = [tokens[i] for i in at.tolist()]
    h = loaded.scorer().features_at(data, at)
    targets = numeral_targets(head.spec, strings)
    log_prob = head.log_prob(h, targets).numpy()
    unk = np.zeros(len(at), dtype=bool)
    if head.has_unk:
        unk = (targets.num == head.unk_num).numpy()
        types = {s for s, u in zip(strings, unk, strict=True) if u}
        log_prob[unk] -= math.log(max(len(types), 1))  # Ueberla's adjustment
    cands = numeral_targets(head.spec, head.spec.candidates)
    best = torch.cat(
        [candidate_scores(head, rows, cands).argmax(1) for rows in torch.split(h, ROWS_PER_CHUNK)]
    )
    return NumeralScores(
        split=split,
        positions=at,
        tokens=strings,
        log_prob=log_prob,
        in_vocab=data.token_ids[at] != data.unk_id,
        unk=unk,
        gold=targets.value.numpy(),
        predicted=cands.value[best].numpy(),
        train_mean=head.spec.train_mean,
        train_median=head.spec.train_median,
    )


def _tile(t: Targets, n: int) -> Targets:
    """``t``'s rows repeated n times, one block after another."""
    return Targets(**{k: v.repeat(n, *([1] * (v.dim() - 1))) for k, v in vars(t).items()})


def candidate_scores(head: NumeralHead, h: torch.Tensor, cands: Targets) -> torch.Tensor:
    """log P(candidate | h, numeral) up to a per-row constant: (N, C), for the argmax.

    Categorical models: the numeral logits (one softmax per row; a candidate outside the
    numeral vocabulary is impossible, as <unk_num> names no value). d-RNN: every candidate
    string written from each state. MoG: the interval masses do not depend on h, so they
    are computed once per candidate and mixed with each row's π(h) and P(r | h).
    """
    n, c = len(h), len(cands.num)
    known = cands.num < head.unk_num
    if head.model in ("d-rnn", "combination"):
        rows = h.repeat_interleave(c, 0)
        drnn = head.drnn(rows, _tile(cands, n).chars).double().reshape(n, c)
    if head.model == "d-rnn":
        return drnn
    if head.model == "mog":
        mog = head.mog
        mass = mog.interval_log_mass(cands.value, cands.prec)  # (C, K)
        log_pi = F.log_softmax(mog.mix(h).double(), dim=-1)  # (N, K)
        mixed = torch.logsumexp(log_pi.unsqueeze(1) + mass.unsqueeze(0), dim=-1)
        log_r = F.log_softmax(mog.precision(h).double(), dim=-1)
        r = cands.prec.clamp(max=log_r.shape[1] - 1)
        impossible = cands.prec >= log_r.shape[1]  # a precision the softmax does not cover
        return (log_r[:, r] + mixed + cands.spelling).masked_fill(impossible, -math.inf)
    cat = F.log_softmax(head.num_logits(h).double(), dim=-1)[:, cands.num]
    cat = cat.masked_fill(~known, -math.inf)
    if head.model != "combination":
        return cat
    g = head.gate(h).double()
    return torch.logaddexp(F.logsigmoid(g) + cat, F.logsigmoid(-g) + drnn)
