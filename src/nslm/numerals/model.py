"""The seven numeral language models of Spithourakis & Riedel (ACL 2018, "Numeracy for
Language Models", Sec. 3) as one head on nslm's backbone (``heads = ["numeral"]``).

Words keep nslm's vocabulary and its softmax (adaptive, the NNLM's cutoffs); numerals seen
at least ``numeral_min_count`` times in training form the numeral vocabulary, the others
are <unk_num>. ``numeral_model`` picks how a numeral is predicted:

* ``softmax`` — one softmax over words, numerals and <unk_num> (Sec. 3.1): the numeral logits
  join the adaptive softmax's head, so every numeral competes with the frequent words;
* ``softmax+rnn`` — as softmax, each in-vocabulary numeral's logit adding h·E(n), its
  output embedding built from its digits (Sec. 3.2);
* ``h-softmax`` — P(word | h)·P(w | h, word) or P(numeral | h)·P(n | h, numeral) (Sec. 3.1);
* ``h-softmax+rnn`` — h-softmax with the digit-built output embeddings;
* ``d-rnn`` — P(numeral | h)·P(c_1 … c_n END | h): the string written by a character LSTM;
* ``mog`` — P(numeral | h)·P(r | h)·Σ_k π_k(h)·ΔΦ_k(x, r)·P(spelling | x, r);
* ``combination`` — P(numeral | h)·[g(h)·P_{h-softmax+rnn}(n) + (1 − g(h))·P_{d-rnn}(n)],
  with <unk_num> impossible in the first part: unseen numerals come from the d-RNN alone.

Every input numeral mixes its token embedding with the digit encoding of its string
(:class:`NumeralInput`). Everything is a function of the target's vocabulary id through
per-id tables (:class:`Targets`), so training needs nothing beyond nslm's batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nslm.data.numbers import is_number, number_value
from nslm.models.softmax import SoftmaxLayer
from nslm.numerals.branches import DigitDecoder, DigitEncoder, NumeralMoG
from nslm.numerals.rules import NUMERAL_MODELS
from nslm.numerals.vocab import NumeralSpec, char_ids, precision

FLAT = ("softmax", "softmax+rnn")
CATEGORICAL = ("softmax", "softmax+rnn", "h-softmax", "h-softmax+rnn", "combination")
DIGIT_OUTPUT = ("softmax+rnn", "h-softmax+rnn", "combination")


@dataclass
class Targets:
    """What the head needs of each target row: (N,) tensors, (N, L) for ``chars``."""

    is_num: Tensor  # bool
    word: Tensor  # index in the word softmax (0 at numerals)
    num: Tensor  # numeral index, unk_num for a numeral outside the numeral vocabulary
    chars: Tensor  # START c_1 … c_n END, padded
    value: Tensor  # float64
    prec: Tensor  # r, digits after the decimal point
    spelling: Tensor  # float64, log P(spelling | value, r)

    def rows(self, keep: Tensor) -> Targets:
        return Targets(**{f.name: getattr(self, f.name)[keep] for f in fields(self)})


def numeral_targets(spec: NumeralSpec, strings: list[str], width: int = 0) -> Targets:
    """Targets of numeral strings, in or out of any vocabulary (evaluation, candidates)."""
    index = {t: i for i, t in enumerate(spec.numerals)}
    width = max([width, spec.width] + [len(s) + 2 for s in strings])
    n = len(strings)
    return Targets(
        is_num=torch.ones(n, dtype=torch.bool),
        word=torch.zeros(n, dtype=torch.long),
        num=torch.tensor([index.get(s, spec.unk_num) for s in strings], dtype=torch.long),
        chars=torch.tensor([char_ids(s, width) for s in strings], dtype=torch.long).reshape(n, -1),
        value=torch.tensor([number_value(s) for s in strings], dtype=torch.float64),
        prec=torch.tensor([precision(s) for s in strings], dtype=torch.long),
        spelling=torch.tensor([spec.spelling_log_prob(s) for s in strings], dtype=torch.float64),
    )


class NumeralTables(nn.Module):
    """Per-vocabulary-id :class:`Targets` as buffers, built from the vocabulary strings (not
    saved: the spec rebuilds them)."""

    def __init__(self, spec: NumeralSpec) -> None:
        super().__init__()
        is_num = [is_number(t) for t in spec.itos]
        numerals = [t for t, num in zip(spec.itos, is_num, strict=True) if num]
        words = [i for i, num in enumerate(is_num) if not num]
        self.n_words = len(words)
        word = torch.zeros(len(spec.itos), dtype=torch.long)
        word[words] = torch.arange(len(words))
        full = numeral_targets(spec, numerals, spec.width)
        at = torch.tensor(is_num, dtype=torch.bool)
        for f in fields(Targets):
            column = getattr(full, f.name)
            table = torch.zeros((len(spec.itos), *column.shape[1:]), dtype=column.dtype)
            table[at] = column
            self.register_buffer(f.name, word if f.name == "word" else table, persistent=False)

    def targets(self, ids: Tensor) -> Targets:
        return Targets(**{f.name: getattr(self, f.name)[ids] for f in fields(Targets)})


class NumeralInput(nn.Module):
    """The input embedding of their models (Sec. 3.2): a word reads its token embedding; a
    numeral mixes its token embedding e_t with the digit encoding e_d of its string through a
    gate, g = σ(W·[e_t; e_d] + b), e = (1 − g)·e_t + g·e_d (their release's input gate).
    With tying, the token embeddings are the output layers' rows (Press & Wolf 2017).

    e_d is rescaled to e_t's norm (direction from the digits, scale from the token): unscaled,
    Adam grows it to ~20× the words' inputs within 60 steps (docs/numerals.md)."""

    def __init__(
        self, tables: NumeralTables, words: nn.Module, nums: nn.Module, digit_size: int, dim: int
    ) -> None:
        super().__init__()
        self.tables, self.words, self.nums = tables, words, nums
        self.digits = DigitEncoder(digit_size, dim)
        self.gate = nn.Linear(2 * dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        flat = x.reshape(-1)
        out = self.words(self.tables.word[flat])
        at = torch.nonzero(self.tables.is_num[flat]).squeeze(1)
        if len(at):
            ids = flat[at]
            types, inverse = torch.unique(ids, return_inverse=True)  # encode each type once
            e_d = self.digits(self.tables.chars[types])[inverse]
            e_t = self.nums(self.tables.num[ids])
            scale = e_t.norm(dim=-1, keepdim=True) / e_d.norm(dim=-1, keepdim=True).clamp_min(1e-6)
            e_d = e_d * scale
            g = torch.sigmoid(self.gate(torch.cat([e_t, e_d], dim=-1)))
            out = out.index_put((at,), ((1 - g) * e_t + g * e_d).to(out.dtype))
        return out.reshape(*x.shape, -1)


class RowsOf(nn.Module):
    """Embedding lookups into a linear layer's weight rows (tied numeral embeddings)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.linear = linear

    def forward(self, ids: Tensor) -> Tensor:
        return F.embedding(ids, self.linear.weight)


class NumeralHead(nn.Module):
    """One of the seven models (module docstring); ``target_log_prob`` is exact and
    normalised over words and numerals (numeral strings for the open-vocabulary ones)."""

    def __init__(
        self,
        in_dim: int,
        spec: NumeralSpec,
        model: str,
        kind: str,
        cutoffs: list[int],
        div: float,
        digit_size: int,
    ) -> None:
        super().__init__()
        if model not in NUMERAL_MODELS:
            raise ValueError(f"numeral_model must be one of {NUMERAL_MODELS}, not {model!r}")
        self.model, self.spec = model, spec
        self.tables = NumeralTables(spec)
        self.words = SoftmaxLayer(in_dim, self.tables.n_words, kind, cutoffs, div)
        self.unk_num = spec.unk_num
        if model in CATEGORICAL:
            self.num_out = nn.Linear(in_dim, spec.unk_num + 1)
        if model in DIGIT_OUTPUT:
            self.out_digits = DigitEncoder(digit_size, in_dim)
            chars = numeral_targets(spec, spec.numerals, spec.width).chars
            self.register_buffer("num_chars", chars, persistent=False)
        if model not in FLAT:
            self.branch = nn.Linear(in_dim, 2)  # P(word | h), P(numeral | h)
        if model in ("d-rnn", "combination"):
            self.drnn = DigitDecoder(in_dim, digit_size)
        if model == "mog":
            self.mog = NumeralMoG(in_dim, spec.mog_means, spec.mog_stds, spec.max_precision)
        if model == "combination":
            self.gate = nn.Linear(in_dim, 1)
        if spec.log_prior:
            self._start_from_priors()

    @torch.no_grad()
    def _start_from_priors(self) -> None:
        """Output biases at the training priors (docs/numerals.md: from default ones the flat
        softmax's first mass is ~75% on numerals, the LSTM saturates and never leaves the
        unigram plateau): log P(n | numeral), plus in the flat softmax the offset giving the
        numerals their training share q beside the head's ~0 logits; branch (log(1 − q), log q).
        """
        q = min(max(self.spec.numeral_share, 1e-6), 0.5)
        if hasattr(self, "num_out"):
            bias = torch.tensor(self.spec.log_prior, dtype=self.num_out.bias.dtype)
            if self.model in FLAT:
                a = getattr(self.words, "adaptive", None)
                n_head = a.head.out_features if a is not None else self.words.n_out
                bias += math.log(q / (1 - q) * n_head)
            self.num_out.bias.copy_(bias)
        if hasattr(self, "branch"):
            self.branch.bias.copy_(torch.tensor([math.log(1 - q), math.log(q)]))

    @property
    def has_unk(self) -> bool:
        """Whether a numeral outside the numeral vocabulary is scored as <unk_num>."""
        return self.model in CATEGORICAL and self.model != "combination"

    # -- the numeral logits (categorical models) ------------------------------------------

    def num_logits(self, h: Tensor) -> Tensor:
        """Logits of the in-vocabulary numerals and <unk_num> (last): (N, K + 1)."""
        logits = self.num_out(h).float()
        if self.model in DIGIT_OUTPUT:
            # Sec. 3.2: the output embedding of numeral n is built from its digits; <unk_num>
            # has no digits and keeps its plain logit, as in their release
            emb = self.out_digits(self.num_chars)
            digit = h.float() @ emb.float().t()
            logits = logits + F.pad(digit, (0, 1))
        if self.model == "combination":  # <unk_num> off: unseen numerals come from the d-RNN
            off = torch.zeros(logits.shape[1], dtype=torch.bool, device=logits.device)
            off[-1] = True
            logits = logits.masked_fill(off, -math.inf)
        return logits

    # -- log-probabilities ---------------------------------------------------------------

    def _flat(self, h: Tensor, t: Targets) -> Tensor:
        """One softmax over words and numerals (Sec. 3.1). With an adaptive word softmax the
        numeral logits join its head (shortlist words + cluster logits), so a numeral
        competes with the frequent words and a tail word is its cluster's share, as ever."""
        with torch.autocast(h.device.type, enabled=False):
            h = h.float()
            softmax = self.words
            if softmax.kind == "adaptive":
                a = softmax.adaptive
                head, shortlist = a.head(h), a.shortlist_size
            else:
                head, shortlist = softmax.linear(h), softmax.n_out
            joint = F.log_softmax(torch.cat([head, self.num_logits(h)], dim=-1), dim=-1)
            index = torch.where(t.is_num, head.shape[1] + t.num, t.word.clamp(max=shortlist - 1))
            out = joint.gather(1, index.unsqueeze(1)).squeeze(1)
            if softmax.kind != "adaptive":
                return out
            for k, (lo, hi) in enumerate(zip(a.cutoffs[:-1], a.cutoffs[1:], strict=True)):
                rows = torch.nonzero(~t.is_num & (t.word >= lo) & (t.word < hi)).squeeze(1)
                if len(rows):
                    tail = F.log_softmax(a.tail[k](h[rows]), dim=-1)
                    within = tail.gather(1, (t.word[rows] - lo).unsqueeze(1)).squeeze(1)
                    out = out.index_put((rows,), joint[rows, shortlist + k] + within)
            return out

    def numeral_log_prob(self, h: Tensor, t: Targets) -> Tensor:
        """log P(n | h, numeral) of the hierarchical models' numeral branch (float64)."""
        if self.model == "d-rnn":
            return self.drnn(h, t.chars).double()
        if self.model == "mog":
            return self.mog(h, t.value, t.prec) + t.spelling
        cat = F.log_softmax(self.num_logits(h), dim=-1).gather(1, t.num.unsqueeze(1))
        cat = cat.squeeze(1).double()
        if self.model != "combination":
            return cat
        g = self.gate(h).double().squeeze(1)
        # their release mixes the modes' likelihoods with a softmax over modes: here two
        return torch.logaddexp(F.logsigmoid(g) + cat, F.logsigmoid(-g) + self.drnn(h, t.chars))

    def log_prob(self, h: Tensor, t: Targets) -> Tensor:
        """log P(target | h) per row over words and numerals (float64)."""
        if self.model in FLAT:
            return self._flat(h, t).double()
        branch = F.log_softmax(self.branch(h).double(), dim=-1)
        # built from the branch, not torch.empty: a rank whose batch holds no target (an
        # epoch's last window) still returns a tensor of the graph, and backward runs
        out = branch[:, 0]
        words = torch.nonzero(~t.is_num).squeeze(1)
        nums = torch.nonzero(t.is_num).squeeze(1)
        if len(words):
            lp = -self.words.nll(h[words], t.word[words]).double()
            out = out.index_put((words,), branch[words, 0] + lp)
        if len(nums):
            num_lp = branch[nums, 1] + self.numeral_log_prob(h[nums], t.rows(nums))
            out = out.index_put((nums,), num_lp)
        return out

    def target_log_prob(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        return self.log_prob(h, self.tables.targets(targets)).float()

    def nll(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        return -self.target_log_prob(h, targets, classes)


def attach_numeral_model(cfg, backbone: nn.Module, spec: NumeralSpec) -> NumeralHead:
    """The head of ``cfg.numeral_model`` on ``backbone``, whose input embedding becomes a
    :class:`NumeralInput` (tied to the head's output layers when ``cfg.tie_weights``)."""
    from nslm.models.adaptive_input import TiedInput

    dim = backbone.out_dim
    head = NumeralHead(
        dim, spec, cfg.numeral_model, cfg.softmax, cfg.cutoffs, cfg.div_value, cfg.digit_size
    )
    tie = cfg.tie_weights and hasattr(head, "num_out")
    if cfg.tie_weights:
        words: nn.Module = TiedInput(head.words)
    else:
        words = nn.Embedding(head.tables.n_words, cfg.emb_size)
        nn.init.uniform_(words.weight, -0.1, 0.1)  # as the LSTM backbone's own embedding
    if tie:
        nums: nn.Module = RowsOf(head.num_out)
    else:
        nums = nn.Embedding(spec.unk_num + 1, cfg.emb_size)
        nn.init.uniform_(nums.weight, -0.1, 0.1)
    backbone.embed = NumeralInput(head.tables, words, nums, cfg.digit_size, cfg.emb_size)
    return head
