"""The parts the numeral models of Spithourakis & Riedel (ACL 2018) build numerals from:

* :class:`DigitEncoder` — a numeral's characters → one vector (the "digit-RNN" embeddings,
  Sec. 3.2): the input embeddings of every model and the output embeddings of "+RNN";
* :class:`DigitDecoder` — the d-RNN (Sec. 3.3): a character LSTM started from the LM's state
  that writes the numeral, an open-vocabulary distribution over strings;
* :class:`NumeralMoG` — the MoG (Sec. 3.4): a precision r and a mixture of frozen Gaussians
  over the value, whose mass on the rounding interval of (x, r) is the numeral's.

Characters are the ids of :mod:`nslm.numerals.vocab` (``START c_1 … c_n END``, padded).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nslm.numerals.vocab import N_SYMBOLS, PAD, START


class DigitEncoder(nn.Module):
    """``START c_1 … c_n END`` → the LSTM's state after END, projected to ``out_dim``."""

    def __init__(self, size: int, out_dim: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(N_SYMBOLS, size, padding_idx=PAD)
        self.lstm = nn.LSTM(size, size, batch_first=True)
        self.out = nn.Linear(size, out_dim)

    def forward(self, chars: Tensor) -> Tensor:
        # packed: the LSTM runs each string's own length (most numerals are 1–4 characters,
        # the padded width ~17), and its final state is the one after END
        lengths = (chars != PAD).sum(dim=1).cpu()
        packed = pack_padded_sequence(
            self.embed(chars), lengths, batch_first=True, enforce_sorted=False
        )
        _, (h, _) = self.lstm(packed)
        return self.out(h[-1])


class DigitDecoder(nn.Module):
    """The d-RNN: log P(c_1 … c_n END | h) = Σ_i log P(c_i | c_<i, h), Sec. 3.3.

    The decoder's first hidden state is tanh(W·h) of the LM's state h (their release starts
    it at h itself; a projection lets the decoder be smaller than the LM). It predicts one of
    the 12 characters or END at every step, so its strings form a proper distribution over
    all finite strings of the alphabet, well-formed numerals or not: a string's mass is its
    own, never shared with a token id.
    """

    def __init__(self, in_dim: int, size: int) -> None:
        super().__init__()
        self.start = nn.Linear(in_dim, size)
        self.embed = nn.Embedding(N_SYMBOLS, size, padding_idx=PAD)
        self.lstm = nn.LSTM(size, size, batch_first=True)
        self.out = nn.Linear(size, N_SYMBOLS)
        # PAD and START are never written: −inf logits, so they take no mass
        never = torch.zeros(N_SYMBOLS)
        never[[PAD, START]] = -math.inf
        self.register_buffer("never", never, persistent=False)

    def step_log_probs(self, h: Tensor, chars: Tensor) -> Tensor:
        """log P(· | c_<i, h) after each prefix of ``chars`` (N, L): (N, L, N_SYMBOLS)."""
        h0 = torch.tanh(self.start(h)).unsqueeze(0)
        # packed, so the LSTM runs each string's own length, not the padded width (scoring
        # every candidate string from every state is the evaluation's largest cost)
        lengths = (chars != PAD).sum(dim=1).cpu()
        packed = pack_padded_sequence(
            self.embed(chars), lengths, batch_first=True, enforce_sorted=False
        )
        out, _ = self.lstm(packed, (h0, torch.zeros_like(h0)))
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=chars.shape[1])
        return F.log_softmax(self.out(out).float() + self.never, dim=-1)

    def forward(self, h: Tensor, chars: Tensor) -> Tensor:
        """log P(string | h) of each row's ``START c_1 … c_n END`` (N, L)."""
        logp = self.step_log_probs(h, chars[:, :-1])
        targets = chars[:, 1:]
        picked = logp.gather(2, targets.unsqueeze(2)).squeeze(2)
        return torch.where(targets != PAD, picked, torch.zeros_like(picked)).sum(dim=1)


def log_normal_interval(lo: Tensor, hi: Tensor) -> Tensor:
    """log(Φ(hi) − Φ(lo)) for standardised bounds lo < hi, stable far in either tail.

    Above the mean the difference is taken as Φ(−lo) − Φ(−hi), so neither term rounds to 1;
    both are log-CDFs (``log_ndtr``, exact for very negative arguments) and the difference is
    e^A·(1 − e^(B−A)). Where even that rounds to 0 (an interval ~10⁻¹⁶ of a standard
    deviation wide), the midpoint rule log φ(mid) + log(hi − lo) takes over, as their release
    does for every zero difference.
    """
    flip = lo > 0
    a = torch.special.log_ndtr(torch.where(flip, -lo, hi))
    b = torch.special.log_ndtr(torch.where(flip, -hi, lo))
    exact = a + torch.log(-torch.expm1(b - a))
    mid = 0.5 * (lo + hi)
    approx = -0.5 * mid**2 - 0.5 * math.log(2 * math.pi) + torch.log(hi - lo)
    return torch.where(b < a, exact, approx)


class NumeralMoG(nn.Module):
    """The MoG of Sec. 3.4 for one numeral of value x and precision r:

        P(x, r | h) = P(r | h) · Σ_k π_k(h) · [Φ_k(x + ½·10⁻ʳ) − Φ_k(x − ½·10⁻ʳ)] / Z_k(r)

    with frozen Gaussians (μ_k, σ_k) fitted on the training values and π(h), P(r | h)
    softmaxes of the LM's state. Numerals have no sign, so the representable values at
    precision r are the grid 0, 10⁻ʳ, 2·10⁻ʳ, …; Z_k(r) = 1 − Φ_k(−½·10⁻ʳ), the component's
    mass above the grid's lowest interval, makes the intervals of every r sum to 1 (their
    release drops that mass instead). A string adds log P(spelling | x, r)
    (:meth:`NumeralSpec.spelling_log_prob`); r above the largest covered is impossible.
    """

    def __init__(self, in_dim: int, means: list[float], stds: list[float], max_r: int) -> None:
        super().__init__()
        self.mix = nn.Linear(in_dim, len(means))
        self.precision = nn.Linear(in_dim, max_r + 1)
        # frozen: buffers, float64 so that a year's interval of width 1 is resolved
        self.register_buffer("means", torch.tensor(means, dtype=torch.float64))
        self.register_buffer("stds", torch.tensor(stds, dtype=torch.float64))

    def interval_log_mass(self, value: Tensor, r: Tensor) -> Tensor:
        """log [Φ_k(x + δ) − Φ_k(x − δ)] / Z_k(r) for every row and component: (N, K)."""
        half = 0.5 * torch.pow(10.0, -r.double()).unsqueeze(1)
        x = value.double().unsqueeze(1)
        mass = log_normal_interval(
            (x - half - self.means) / self.stds, (x + half - self.means) / self.stds
        )
        return mass - torch.special.log_ndtr((self.means + half) / self.stds)

    def forward(self, h: Tensor, value: Tensor, r: Tensor) -> Tensor:
        """log P(x, r | h) per row (float64)."""
        n_r = self.precision.out_features
        log_r = F.log_softmax(self.precision(h).double(), dim=-1)
        lp_r = log_r.gather(1, r.clamp(max=n_r - 1).unsqueeze(1)).squeeze(1)
        lp_r = torch.where(r < n_r, lp_r, torch.full_like(lp_r, -math.inf))
        log_pi = F.log_softmax(self.mix(h).double(), dim=-1)
        return lp_r + torch.logsumexp(log_pi + self.interval_log_mass(value, r), dim=-1)
