"""What the numeral models of Spithourakis & Riedel (ACL 2018) know about numerals before
training: the numeral vocabulary, the characters of every numeral, the frozen Gaussians of
the MoG and the spelling shares that turn a (value, precision) into a string.

Everything is built from the training split once (:meth:`NumeralSpec.from_corpus`) and saved
with the run (``numerals.json``), so a trained run rebuilds its model without the corpus.
A numeral is a token of the pattern ``\\d+(,\\d{3})*(\\.\\d+)?`` (:func:`~nslm.data.numbers.
is_number`): what nslm's preparation re-joins and tags with a number class.

Characters come from the token string, never from its float value: a float32 rebuilt value
loses digits past ~7 significant figures (a bug of the original release).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from nslm.data.numbers import is_number, number_value

# The characters a numeral is written with; ids 0–2 are padding and the start/end marks.
ALPHABET = "0123456789,."
PAD, START, END = 0, 1, 2
N_SYMBOLS = 3 + len(ALPHABET)
CHAR_ID = {ch: 3 + i for i, ch in enumerate(ALPHABET)}
UNK_NUM = "<unk_num>"


def char_ids(token: str, width: int) -> list[int]:
    """``START c_1 … c_n END`` then padding, ``width`` ids (the string is cut to fit)."""
    ids = [START] + [CHAR_ID[ch] for ch in token[: width - 2]] + [END]
    return ids + [PAD] * (width - len(ids))


def precision(token: str) -> int:
    """r, the digits after the decimal point: the numeral stands for [x − ½·10⁻ʳ, x + ½·10⁻ʳ)."""
    return len(token.split(".", 1)[1]) if "." in token else 0


def integer_digits(token: str) -> int:
    return len(token.split(".", 1)[0].replace(",", ""))


def leading_zeros(token: str) -> int:
    """Zeros written before the canonical integer part ("007" → 2; "0.5" and "0" → 0)."""
    digits = token.split(".", 1)[0].replace(",", "")
    return len(digits) - len(digits.lstrip("0") or "0")


def canonical(value: float, r: int, comma: bool) -> str:
    """The string a (value, precision) is written as without leading zeros."""
    return f"{value:,.{r}f}" if comma else f"{value:.{r}f}"


@dataclass
class NumeralSpec:
    """The numeral side of a run (module docstring); JSON-serialisable as it stands."""

    itos: list[str]  # the run's vocabulary: per-id tables are built from these strings
    numerals: list[str]  # in-vocabulary numerals (training count ≥ min_count), vocab order
    width: int  # character ids per numeral, START and END included
    max_precision: int  # the precision softmax of the MoG covers r = 0 … max_precision
    mog_means: list[float]  # the MoG's frozen Gaussians, fitted on the training values
    mog_stds: list[float]
    comma_share: dict[str, float]  # integer digits (≥ 4) → P(written with commas)
    zero_share: float  # P(one more leading zero): a geometric number of leading zeros
    candidates: list[str]  # the value-prediction candidates (in-vocabulary ∪ quantiles)
    train_mean: float  # the baselines of value prediction
    train_median: float
    # log training share of each in-vocabulary numeral and <unk_num> among numeral tokens,
    # and the numerals' share of all tokens: the output layers start from these priors
    log_prior: list[float] = field(default_factory=list)
    numeral_share: float = 0.0

    @property
    def unk_num(self) -> int:
        """The numeral index of <unk_num>: after the in-vocabulary numerals."""
        return len(self.numerals)

    @classmethod
    def from_corpus(cls, corpus, min_count: int = 2, levels: int = 7) -> NumeralSpec:
        itos = list(corpus.vocab.itos)
        counts = np.asarray(corpus.vocab.counts)
        kept = [i for i, t in enumerate(itos) if is_number(t) and counts[i] >= min_count]
        numerals = [itos[i] for i in kept]
        train = corpus.train
        tokens = [itos[i] for i in train.token_ids.tolist() if is_number(itos[i])]
        values = np.array([number_value(t) for t in tokens], dtype=np.float64)
        means, stds = fit_kernels(values, levels)
        # the training share of each kept numeral among numeral tokens, the rest <unk_num>'s
        kept_counts = counts[kept].astype(np.float64)
        rest = max(len(tokens) - kept_counts.sum(), 1.0)
        shares = np.append(kept_counts, rest) / max(len(tokens), 1)
        return cls(
            itos=itos,
            numerals=numerals,
            width=max(len(t) for t in itos if is_number(t)) + 4,  # room for longer test ones
            max_precision=max(precision(t) for t in tokens) + 1,
            mog_means=means,
            mog_stds=stds,
            comma_share=comma_shares(tokens),
            zero_share=zero_share(tokens),
            candidates=value_candidates(numerals, tokens),
            train_mean=float(values.mean()),
            train_median=float(np.median(values)),
            log_prior=np.log(shares).tolist(),
            numeral_share=len(tokens) / max(len(train.token_ids), 1),
        )

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> NumeralSpec:
        return cls(**data)

    def spelling_log_prob(self, token: str) -> float:
        """log P(this spelling | value, precision): commas or not, and leading zeros.

        The MoG gives a mass to a (value, precision); a string adds how it is written. A
        value of d ≥ 4 integer digits is written with commas with the training share for d
        (add-one smoothed), and z leading zeros have the geometric probability (1 − q)·qᶻ,
        so the spellings of one (value, precision) sum to 1. A string no rule writes (commas
        in the wrong places) gets −inf.
        """
        z = leading_zeros(token)
        stripped = token[z:] if z else token
        value, r = number_value(token), precision(token)
        comma = "," in token
        if stripped != canonical(value, r, comma):
            return -np.inf
        lp = np.log1p(-self.zero_share) + z * np.log(self.zero_share)
        d = integer_digits(stripped)
        if d >= 4:
            share = self.comma_share.get(str(d), 0.5)
            lp += np.log(share if comma else 1.0 - share)
        return float(lp)


def fit_kernels(values: np.ndarray, levels: int) -> tuple[list[float], list[float]]:
    """The frozen Gaussians of the MoG, as the original release's ``get_kernels``: the
    values' mean and standard deviation, and spherical Gaussian mixtures of 2, 4, …, 2^levels
    components fitted by EM from quantile starts (Spithourakis & Riedel 2018, Sec. 3.4)."""
    from sklearn.mixture import GaussianMixture

    x = values[:, None]
    means, stds = [float(values.mean())], [float(values.std())]
    for k in range(1, levels + 1):
        n = 2**k
        if n > len(np.unique(values)):  # a tiny corpus: no more components than values
            break
        starts = np.percentile(values, np.linspace(0.0, 100.0, n))[:, None]
        gmm = GaussianMixture(n, covariance_type="spherical", means_init=starts, random_state=42)
        gmm.fit(x)
        means += gmm.means_[:, 0].tolist()
        stds += np.sqrt(gmm.covariances_).tolist()
    order = np.argsort(means, kind="stable")
    return [means[i] for i in order], [stds[i] for i in order]


def comma_shares(tokens: list[str]) -> dict[str, float]:
    """P(commas | d integer digits) on the training numerals, add-one smoothed, d ≥ 4."""
    with_comma: dict[int, int] = {}
    total: dict[int, int] = {}
    for t in tokens:
        d = integer_digits(t[leading_zeros(t) :])
        if d >= 4:
            total[d] = total.get(d, 0) + 1
            with_comma[d] = with_comma.get(d, 0) + ("," in t)
    return {str(d): (with_comma[d] + 1) / (total[d] + 2) for d in sorted(total)}


def zero_share(tokens: list[str]) -> float:
    """q of the geometric leading-zero count: zeros / (zeros + numerals), add-one smoothed."""
    zeros = sum(leading_zeros(t) for t in tokens)
    return (zeros + 1) / (zeros + len(tokens) + 2)


def value_candidates(numerals: list[str], tokens: list[str], n: int = 100) -> list[str]:
    """The strings a value prediction chooses among: the in-vocabulary numerals and the
    training numerals at ``n`` evenly spaced ranks of the value order (the original
    release's candidates; each quantile keeps its own spelling, hence its precision)."""
    ordered = sorted(tokens, key=number_value)
    picks = np.linspace(0, len(ordered) - 1, n).round().astype(int)
    return list(dict.fromkeys(numerals + [ordered[i] for i in picks]))
