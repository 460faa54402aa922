"""Scoring a trained numeral model (numerals/model.py) at the numerals of a split, as
Spithourakis & Riedel (2018) report them (Table 4): perplexity on numerals and value
prediction.

Positions: every token whose rule class is a number class, in or out of the run's
vocabulary, the LSTM reading the whole split as the NNLM's evaluation does (one state per
stream, carried). ``head.log_prob`` is the joint log P(target | h) over words and numerals:
it includes P(numeral | h), the branch of the hierarchical models, and in the flat ones
the numeral competes with the words in one softmax, so a numeral's figure is its
probability as the next token, as the NNLM's is. Three figures:

* ``proper`` — every numeral counts and every model is one distribution over all strings. A
  numeral a closed model maps to <unk_num> (outside its numeral vocabulary K) is charged
  P(<unk_num> | h) · P_spell(s | s ∉ K), P_spell a byte n-gram spelling model of the
  training numerals outside K (:func:`unk_num_spelling`), normalised as in
  :mod:`nslm.scores.spelling`: P_spell(s | s ∉ K) = P_spell(s) / (1 − Σ_{k ∈ K} P_spell(k))
  sums to one over the byte strings outside K, hence to at most one over the numerals it is
  charged for. The open-vocabulary branches (d-RNN, MoG, the combination's d-RNN) score the
  string itself.
* ``adjusted`` — Ueberla's (1994) adjusted perplexity, the convention of their release: a
  numeral mapped to <unk_num> is charged P(<unk_num> | h) / |U|, U the distinct such types of
  the scored text. Their release counts U over the *training* types below the threshold;
  nslm counts the scored text's, the |U| its NNLM is charged with
  (:mod:`nslm.evaluation.open_vocab`), so both adjusted figures follow one rule. Not a
  distribution (<unk_num> keeps its whole mass as well): named as such, beside the proper one.
* ``in_vocab`` — the proper figure at the positions whose token is in the run's training
  vocabulary (``token_ids != unk_id``): the same positions for every model and the NNLM.

A token outside the run's vocabulary is <unk> in ``token_ids``; its string comes from the
prepared text's ``strings`` (:class:`nslm.data.fixed_vocab.TextSplit`) or from re-tagging the
split's file (:func:`split_tokens`). The LSTM reads such a token as the word <unk>, as the
NNLM does (their release would read its digits).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from nslm.data.corpus import Split
from nslm.data.numbers import is_number, number_positions, number_value
from nslm.data.prepare import split_lines
from nslm.data.tagging import alternate_names_of, tag_lines
from nslm.data.textfile import read_text
from nslm.errors import NslmError
from nslm.numerals.model import NumeralHead, Targets, numeral_targets
from nslm.numerals.value_metrics import baseline_metrics, value_metrics
from nslm.numerals.vocab import END, PAD, START, NumeralSpec
from nslm.runs.load import LoadedRun
from nslm.scores.spelling import SpellingModel

ROWS_PER_CHUNK = 16  # states scored against every candidate at once


def split_tokens(loaded: LoadedRun, split: str) -> list[str]:
    """The token strings of ``split`` as the run's preparation tagged them: aligned with the
    split's arrays, out-of-vocabulary tokens included."""
    from nslm.data.locate import locate_corpus

    cfg = loaded.cfg
    path = locate_corpus(cfg.corpus, download=False)[split]
    rules = tuple(loaded.corpus.class_rules.values())
    naming = alternate_names_of(loaded.corpus.meta)
    lines = split_lines(read_text(path))
    tokens = tag_lines(lines, cfg.classes, rules, alternate_names=naming).tokens
    if len(tokens) != len(loaded.corpus.splits[split]):
        raise NslmError(f"{path} does not match the prepared {split} split")
    return tokens


def unk_num_spelling(spec: NumeralSpec) -> SpellingModel:
    """P_spell(s | s ∉ K), what a closed numeral model's P(<unk_num> | h) is spread by.

    Fitted, as :func:`nslm.scores.spelling.fit_spelling` fits the NNLM's, on the types that
    stand in for the unseen ones (Good 1953: what has not been seen looks like what was seen
    least): the training numerals outside K, those seen fewer than ``numeral_min_count``
    times, each type once. Every training type is in the run's vocabulary (``spec.itos``),
    so they are its numerals outside K; with none, the model is the uniform byte model.
    Then fixed outside K (:meth:`SpellingModel.outside`), so that its mass over the strings
    outside K is one and over the numerals among them at most one.
    """
    known = set(spec.numerals)
    rare = [t for t in spec.itos if is_number(t) and t not in known]
    return SpellingModel.fit(rare).outside(spec.numerals)


@dataclass
class NumeralScores:
    """Per numeral position of a split (all arrays aligned with ``positions``)."""

    split: str
    positions: np.ndarray  # positions in the split
    tokens: list[str]
    log_prob: np.ndarray  # natural log, the proper convention
    log_prob_adjusted: np.ndarray  # Ueberla's adjusted convention
    in_vocab: np.ndarray  # bool: the token is in the run's vocabulary
    unk: np.ndarray  # bool: the closed model's <unk_num>
    gold: np.ndarray  # the token's value
    train_mean: float
    train_median: float
    candidates: list[str] | None = None  # what the mode was chosen among
    predicted_index: np.ndarray | None = None  # the mode, an index into ``candidates``

    @property
    def predicted(self) -> np.ndarray | None:
        """The value of the mode at every position (None when no mode was asked for)."""
        if self.predicted_index is None or self.candidates is None:
            return None
        values = np.array([number_value(c) for c in self.candidates])
        return values[self.predicted_index]

    def summary(self) -> dict:
        """The one-call figures: numeral perplexities, value metrics, counts."""
        out = {
            "split": self.split,
            "num_ppl_proper": math.exp(-self.log_prob.mean()),
            "num_ppl_adjusted": math.exp(-self.log_prob_adjusted.mean()),
            "num_ppl_in_vocab": math.exp(-self.log_prob[self.in_vocab].mean()),
            "n_tokens": len(self.positions),
            "n_in_vocab": int(self.in_vocab.sum()),
            "n_unk_num": int(self.unk.sum()),
            "unk_num_types": len({t for t, u in zip(self.tokens, self.unk, strict=True) if u}),
            "baselines": baseline_metrics(self.gold, self.train_mean, self.train_median),
        }
        predicted = self.predicted
        if predicted is not None:
            values = value_metrics(self.gold, predicted)
            out.update(mape=values["mape"], mdape=values["mdape"], mdae=values["mdae"])
            out["n_zero_gold"] = values["n_zero"]
        return out


def numeral_positions(loaded: LoadedRun, split: str) -> np.ndarray:
    """:func:`~nslm.data.numbers.number_positions` of the run's prepared ``split`` ("valid"
    or "test")."""
    return number_positions(loaded.corpus.splits[split], loaded.corpus.class_names)


@torch.no_grad()
def score_numerals(
    loaded: LoadedRun,
    split: str | Split,
    *,
    strings: Sequence[str] | None = None,
    spelling: SpellingModel | None = None,
    candidates: Sequence[str] | None = None,
    predict: bool = True,
) -> NumeralScores:
    """Score every numeral of ``split`` under the run's numeral model.

    ``split``: "valid" or "test" of the run's corpus, or a prepared :class:`Split` with its
    token ``strings`` (a :class:`~nslm.data.fixed_vocab.TextSplit`'s, which may be cut to
    its first tokens). ``spelling``: P_spell(s | s ∉ K) of the proper convention (default
    :func:`unk_num_spelling` of the run). ``candidates``: the strings the mode is chosen
    among (default the run's own, ``spec.candidates``); ``predict=False`` skips the mode
    (the d-RNN's is the costly part: every candidate written from every state).
    """
    if "numeral" not in loaded.model.heads:
        raise NslmError(f"{loaded.run_dir} has no numeral model (heads = {loaded.cfg.heads})")
    head: NumeralHead = loaded.model.heads["numeral"]
    if isinstance(split, str):
        name, data = split, loaded.corpus.splits[split]
        strings = split_tokens(loaded, split) if strings is None else strings
    else:
        name, data = split.name, split
        if strings is None:
            raise ValueError("a prepared split needs its token strings")
    if len(strings) != len(data):
        raise ValueError(f"{len(strings)} strings for a split of {len(data)} tokens")
    at = number_positions(data, loaded.corpus.class_names)
    tokens = [strings[i] for i in at.tolist()]
    h = loaded.scorer().features_at(data, at)
    targets = numeral_targets(head.spec, tokens)
    log_prob = head.log_prob(h, targets).numpy()
    adjusted = log_prob.copy()
    unk = np.zeros(len(at), dtype=bool)
    if head.has_unk:
        spelling = unk_num_spelling(head.spec) if spelling is None else spelling
        unk = (targets.num == head.unk_num).numpy()
        rare = [t for t, u in zip(tokens, unk, strict=True) if u]
        log_prob[unk] += spelling.log_prob_outside(rare)
        adjusted[unk] -= math.log(max(len(set(rare)), 1))  # Ueberla's adjustment
    cands = list(head.spec.candidates if candidates is None else candidates)
    best = None
    if predict:
        best = numeral_head_modes(head, h, cands, spelling)
    return NumeralScores(
        split=name,
        positions=at,
        tokens=tokens,
        log_prob=log_prob,
        log_prob_adjusted=adjusted,
        in_vocab=data.token_ids[at] != data.unk_id,
        unk=unk,
        gold=targets.value.numpy(),
        train_mean=head.spec.train_mean,
        train_median=head.spec.train_median,
        candidates=cands if predict else None,
        predicted_index=best,
    )


def numeral_head_modes(
    head: NumeralHead,
    h: torch.Tensor,
    candidates: Sequence[str],
    spelling: SpellingModel | None = None,
) -> np.ndarray:
    """The index of each row's most probable candidate (the mode over ``candidates``)."""
    cands = numeral_targets(head.spec, list(candidates))
    unk_spelling = None
    if spelling is not None and head.has_unk:
        outside = (cands.num == head.unk_num).numpy()
        unk_spelling = torch.zeros(len(candidates), dtype=torch.float64)
        strings = [c for c, o in zip(candidates, outside, strict=True) if o]
        if strings:
            charge = torch.from_numpy(spelling.log_prob_outside(strings))
            unk_spelling[torch.from_numpy(outside)] = charge
    trie = CandidateTrie.of(cands.chars) if head.model in ("d-rnn", "combination") else None
    best = [
        candidate_scores(head, rows, cands, unk_spelling, trie).argmax(1)
        for rows in torch.split(h, ROWS_PER_CHUNK)
    ]
    return torch.cat(best).numpy() if best else np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class CandidateTrie:
    """The prefix tree of candidate strings (rows of ``START c_1 … c_n END PAD …`` ids):
    node 0 the empty prefix, every other node one character added to its ``parent``, the
    nodes in order of depth (``levels``: each depth's slice); ``ends[j]`` is candidate j's
    node. Candidates share their prefixes, so the d-RNN runs once per node, not once per
    character of every candidate (how many fewer steps on WikiText-2: docs/numerals.md)."""

    parent: torch.Tensor  # (M,), −1 at the root
    char: torch.Tensor  # (M,) the character added (START at the root)
    levels: tuple[slice, ...]
    ends: torch.Tensor  # (C,)

    @classmethod
    def of(cls, chars: torch.Tensor) -> CandidateTrie:
        strings = [tuple(c for c in row[1:] if c not in (PAD, END)) for row in chars.tolist()]
        by_depth: list[set[tuple[int, ...]]] = [{()}]
        for body in strings:
            for d in range(1, len(body) + 1):
                while len(by_depth) <= d:
                    by_depth.append(set())
                by_depth[d].add(body[:d])
        order = [p for level in by_depth for p in sorted(level)]
        index = {p: i for i, p in enumerate(order)}
        bounds = np.cumsum([0] + [len(level) for level in by_depth]).tolist()
        return cls(
            parent=torch.tensor([-1] + [index[p[:-1]] for p in order[1:]], dtype=torch.long),
            char=torch.tensor([START] + [p[-1] for p in order[1:]], dtype=torch.long),
            levels=tuple(slice(a, b) for a, b in itertools.pairwise(bounds)),
            ends=torch.tensor([index[body] for body in strings], dtype=torch.long),
        )


@torch.no_grad()
def drnn_trie_scores(drnn, h: torch.Tensor, trie: CandidateTrie) -> torch.Tensor:
    """log P(c_1 … c_n END | h) of every candidate from every state: (N, C), float64.

    The d-RNN's sum Σ_i log P(c_i | c_<i, h) + log P(END | c, h) (Spithourakis & Riedel
    2018, Sec. 3.3; :class:`~nslm.numerals.branches.DigitDecoder`), computed over the
    prefix tree: each node's LSTM state is one step from its parent's, the root's the step
    that reads START from (tanh(W h), 0); a candidate's score is the sum of the log-
    probabilities along its path plus END at its node. The same figures as
    ``drnn(h, chars)`` string by string (a test checks it). The steps below are those of a
    one-layer LSTM without a projection, the d-RNN's (its ``weight_*_l0`` only).
    """
    lstm = drnn.lstm
    if lstm.num_layers != 1 or lstm.proj_size != 0:
        raise NslmError(
            f"drnn_trie_scores steps a 1-layer LSTM without projection; this d-RNN has "
            f"{lstm.num_layers} layers, proj_size {lstm.proj_size}"
        )
    w_ih, w_hh = lstm.weight_ih_l0, lstm.weight_hh_l0
    bias = lstm.bias_ih_l0 + lstm.bias_hh_l0
    n, m = len(h), len(trie.parent)
    x = drnn.embed(trie.char) @ w_ih.t()  # (M, 4S): the input side of every node's step
    hid = h.new_zeros(n, m, lstm.hidden_size)
    cell = torch.zeros_like(hid)
    start = torch.tanh(drnn.start(h))
    for level in trie.levels:
        if level.start == 0:
            h_prev, c_prev = start.unsqueeze(1), torch.zeros_like(start).unsqueeze(1)
        else:
            up = trie.parent[level]
            h_prev, c_prev = hid[:, up], cell[:, up]
        gates = x[level] + h_prev @ w_hh.t() + bias
        i, f, g, o = gates.chunk(4, dim=-1)  # PyTorch's LSTM gate order
        c_new = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
        hid[:, level] = torch.sigmoid(o) * torch.tanh(c_new)
        cell[:, level] = c_new
    log_dist = F.log_softmax(drnn.out(hid).float() + drnn.never, dim=-1).double()  # (N, M, V)
    # a node's path score: its parent's plus log P(its character | the parent's prefix)
    path = torch.zeros(n, m, dtype=torch.float64)
    for level in trie.levels[1:]:
        up = trie.parent[level]
        step = log_dist[:, up].gather(2, trie.char[level].expand(n, -1).unsqueeze(2))
        path[:, level] = path[:, up] + step.squeeze(2)
    return path[:, trie.ends] + log_dist[:, trie.ends, END]


def candidate_scores(
    head: NumeralHead,
    h: torch.Tensor,
    cands: Targets,
    unk_spelling: torch.Tensor | None = None,
    trie: CandidateTrie | None = None,
) -> torch.Tensor:
    """log P(candidate | h, numeral) up to a per-row constant: (N, C), for the argmax.

    Categorical models: the numeral logits (one softmax per row). A candidate outside the
    numeral vocabulary K gets P(<unk_num> | h, numeral) · P_spell(s | s ∉ K) when
    ``unk_spelling`` holds log P_spell(s | s ∉ K) at those candidates (the proper
    convention of the module docstring), else nothing: <unk_num> alone names no value.
    d-RNN: every candidate string written from each state, over the candidates' prefix tree
    (``trie``, built here when not given). MoG: the interval masses do not depend on h, so
    they are computed once per candidate and mixed with each row's π(h) and P(r | h).
    """
    known = cands.num < head.unk_num
    if head.model in ("d-rnn", "combination"):
        trie = CandidateTrie.of(cands.chars) if trie is None else trie
        drnn = drnn_trie_scores(head.drnn, h, trie)
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
    if unk_spelling is not None and head.has_unk:
        cat = cat + torch.where(known, torch.zeros_like(unk_spelling), unk_spelling)
    else:
        cat = cat.masked_fill(~known, -math.inf)
    if head.model != "combination":
        return cat
    g = head.gate(h).double()
    return torch.logaddexp(F.logsigmoid(g) + cat, F.logsigmoid(-g) + drnn)
