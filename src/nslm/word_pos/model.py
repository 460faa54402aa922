"""Word+POS LSTM LMs (Gill 2017, paper 003) and a left-to-right tagger, one module of kinds.

All kinds share the backbone: word, suffix and shape embeddings (and, for the kinds that
read tags, a tag embedding) → a stacked ``nn.LSTM`` → heads. With ``h`` the state after the
words and tags *before* position t (word_pos/batches.py lays the inputs out so):

- ``word_only``: P(w_t | h) = softmax(W h) (paper 003 Eq. 1).
- ``multitask``: the same, reading words only, with a tag head P(t_t | h) trained as an
  auxiliary loss.
- ``joint`` (factorised): P(w_t, t_t | h) = P(t_t | h) · P(w_t | t_t, h) (paper 003 Eq. 6,
  without its Eq. 10 shortcut), with P(w | t, h) = softmax_w(W h + M[t]). The tag-word table
  ``M`` starts at log Q(t | w) counted on train (add-0.01), so at the start
  P(w | t, h) ∝ P(w | h) · Q(t | w) — Bayes' rule under paper 003's Eq. 3 — and then learns.
  The marginal P(w_t | h) = Σ_t P(t | h) · P(w_t | t, h) is exact.
- ``eq11``: paper 003 Eq. 11, Q(w, p | X) = Q(w | X) · [Q(p | w) + Q(p | X)] / α, with
  Q(p | w) counted on train. Eq. 12's α = Σ_w Σ_p Q(w | X)[Q(p | w) + Q(p | X)] = 1 + 1 = 2
  at every position, since each bracketed term sums to 1 over p and Q(w | X) sums to 1 over
  w. So the marginal over p is Q(w | X) itself: the tag head never changes the word
  probability. Loss ``eq11`` is the joint's cross-entropy; ``eq5`` is paper 003 Eq. 5,
  −log Q(p | w) − log Q(w | X), whose first term is a constant: it trains no tag head.
- ``tagger``: the discriminative baseline, P(t_t | w_≤t, t_<t): its input at t is the
  current word w_t, its shape and the previous tag.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nslm.word_pos.batches import SentenceBatch

KINDS = ("word_only", "joint", "eq11", "multitask", "tagger")
READS_TAGS = ("joint", "eq11", "tagger")
EQ12_ALPHA = 2.0  # Eq. 12's normaliser, the same at every position (see the docstring)
N_SHAPES = 16
JOINT_PRIOR = 0.01  # add-k smoothing of the count-based start of M
CHUNK_FLOATS = 40_000_000  # (positions × tags × words) per chunk of the exact marginal


@dataclass
class WordPosSizes:
    n_words: int
    n_tags: int
    n_suffixes: int
    emb_size: int = 100
    tag_emb_size: int = 16
    shape_emb_size: int = 16
    hidden_size: int = 256
    num_layers: int = 2
    dropout: float = 0.2


@dataclass
class PositionScores:
    """Per-position figures, flat over the positions given (N,)."""

    word: Tensor | None  # log P(w_t | h), the marginal over tags
    joint: Tensor | None  # log P(w_t, t_t | h) for the gold tag
    tag_posterior: Tensor | None  # (N, T) log P(t | w_t, h): the tagger's scores


class WordPosLM(nn.Module):
    """One word+POS model of kind ``kind`` (see the module docstring)."""

    def __init__(
        self,
        kind: str,
        sizes: WordPosSizes,
        tag_word_counts: Tensor | None = None,
        eq11_loss: str = "eq11",
        tag_weight: float = 1.0,
    ) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"unknown word+POS model {kind!r} (one of {', '.join(KINDS)})")
        self.kind, self.sizes, self.eq11_loss, self.tag_weight = kind, sizes, eq11_loss, tag_weight
        self.word_emb = nn.Embedding(sizes.n_words, sizes.emb_size)
        self.suffix_emb = nn.Embedding(sizes.n_suffixes, sizes.shape_emb_size)
        self.shape_emb = nn.Embedding(N_SHAPES, sizes.shape_emb_size)
        width = sizes.emb_size + 2 * sizes.shape_emb_size
        self.tag_emb = None
        if kind in READS_TAGS:
            self.tag_emb = nn.Embedding(sizes.n_tags, sizes.tag_emb_size)
            width += sizes.tag_emb_size
        dropout = sizes.dropout if sizes.num_layers > 1 else 0.0
        self.lstm = nn.LSTM(
            width, sizes.hidden_size, sizes.num_layers, dropout=dropout, batch_first=True
        )
        self.drop = nn.Dropout(sizes.dropout)
        self.word_head = None if kind == "tagger" else nn.Linear(sizes.hidden_size, sizes.n_words)
        self.tag_head = None if kind == "word_only" else nn.Linear(sizes.hidden_size, sizes.n_tags)
        self.tag_word = None
        if kind in ("joint", "eq11") and tag_word_counts is None:
            raise ValueError(f"a {kind} model needs the train counts of (word, tag)")
        if kind == "joint":
            prior = _log_tag_given_word(tag_word_counts, JOINT_PRIOR).T.contiguous()
            self.tag_word = nn.Parameter(prior)  # (T, V), M above
        if kind == "eq11":
            self.register_buffer("tag_given_word", _tag_given_word(tag_word_counts))

    # -- the backbone -----------------------------------------------------------------------

    def forward(
        self,
        words: Tensor,
        tags: Tensor,
        suffixes: Tensor,
        shapes: Tensor,
        state: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """(B, L) inputs → (B, L, H) states and the final LSTM state."""
        parts = [self.word_emb(words), self.suffix_emb(suffixes), self.shape_emb(shapes)]
        if self.tag_emb is not None:
            parts.append(self.tag_emb(tags))
        x = self.drop(torch.cat(parts, dim=-1))
        h, state = self.lstm(x, state)
        return self.drop(h), state

    # -- distributions ----------------------------------------------------------------------

    def word_logits(self, h: Tensor) -> Tensor:
        assert self.word_head is not None
        return self.word_head(h)

    def tag_log_probs(self, h: Tensor) -> Tensor:
        assert self.tag_head is not None
        return F.log_softmax(self.tag_head(h).float(), dim=-1)

    def _joint_parts(self, logits: Tensor) -> Tensor:
        """log Z_t(h) = logsumexp_w (W h + M[t])_w for every tag: (N, T), in chunks."""
        assert self.tag_word is not None
        n_tags, n_words = self.tag_word.shape
        step = max(1, CHUNK_FLOATS // (n_tags * n_words))
        out = [
            torch.logsumexp(chunk[:, None, :] + self.tag_word[None], dim=-1)
            for chunk in logits.split(step)
        ]
        return torch.cat(out) if out else logits.new_zeros((0, n_tags))

    def scores(self, h: Tensor, words: Tensor, tags: Tensor) -> PositionScores:
        """The figures at (N,) positions with states ``h`` (N, H), targets ``words``/``tags``
        (−1 padding allowed; its entries are garbage, masked by the caller)."""
        words, tags = words.clamp(min=0), tags.clamp(min=0)
        if self.kind == "tagger":
            return PositionScores(None, None, self.tag_log_probs(h))
        logits = self.word_logits(h).float()
        if self.kind in ("word_only", "multitask"):
            word = logits.gather(1, words[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)
            return PositionScores(word, None, None)
        tag_lp = self.tag_log_probs(h)
        if self.kind == "eq11":
            word = logits.gather(1, words[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)
            posterior = torch.log((self.tag_given_word[words] + tag_lp.exp()) / EQ12_ALPHA)
            return PositionScores(word, word + posterior.gather(1, tags[:, None])[:, 0], posterior)
        # joint: log P(w | t, h) for the observed word under every tag, then Bayes
        assert self.tag_word is not None
        log_z = self._joint_parts(logits)
        word_given_tag = logits.gather(1, words[:, None]) + self.tag_word[:, words].T - log_z
        joint_all = tag_lp + word_given_tag  # (N, T) log P(w_t, t | h)
        word = torch.logsumexp(joint_all, dim=-1)
        joint = joint_all.gather(1, tags[:, None])[:, 0]
        return PositionScores(word, joint, joint_all - word[:, None])

    # -- training ---------------------------------------------------------------------------

    def loss(self, h: Tensor, words: Tensor, tags: Tensor) -> tuple[Tensor, Tensor]:
        """Mean loss over the (N,) real targets, and its (word, tag) parts for the log."""
        zero = h.new_zeros(())
        word_nll = tag_nll = zero
        if self.kind == "tagger":
            tag_nll = F.cross_entropy(self.tag_head(h).float(), tags)  # type: ignore[misc]
        elif self.kind == "joint":
            assert self.tag_word is not None
            logits = self.word_logits(h).float() + self.tag_word[tags]  # W h + M[t_gold]
            word_nll = F.cross_entropy(logits, words)
            tag_nll = F.nll_loss(self.tag_log_probs(h), tags)
        else:
            word_nll = F.cross_entropy(self.word_logits(h).float(), words)
            if self.kind == "multitask":
                tag_nll = F.nll_loss(self.tag_log_probs(h), tags)
            elif self.kind == "eq11" and self.eq11_loss == "eq11":
                posterior = (self.tag_given_word[words] + self.tag_log_probs(h).exp()) / EQ12_ALPHA
                tag_nll = -torch.log(posterior.gather(1, tags[:, None])).mean()
            elif self.kind == "eq11":  # Eq. 5: −log Q(p | w), a constant of the parameters
                tag_nll = -torch.log(self.tag_given_word[words, tags]).mean()
        weight = self.tag_weight if self.kind == "multitask" else 1.0
        total = word_nll + weight * tag_nll
        return total, torch.stack([word_nll, tag_nll]).detach()


def _tag_given_word(counts: Tensor) -> Tensor:
    """Q(p | w) = count(w, p) / count(w) (paper 003 Eq. 3); uniform for an unseen word."""
    counts = counts.double()
    totals = counts.sum(dim=1, keepdim=True)
    uniform = torch.full_like(counts, 1.0 / counts.shape[1])
    return torch.where(totals > 0, counts / totals.clamp(min=1.0), uniform).float()


def _log_tag_given_word(counts: Tensor, k: float) -> Tensor:
    counts = counts.double()
    smoothed = (counts + k) / (counts.sum(dim=1, keepdim=True) + k * counts.shape[1])
    return smoothed.log().float()


def eq12_alpha(word_probs: Tensor, tag_given_word: Tensor, tag_probs: Tensor) -> float:
    """Eq. 12 summed term by term over (w, p) — the brute force the docstring's α = 2 is
    checked against (tests/word_pos/test_word_pos_model.py)."""
    total = 0.0
    for w in range(word_probs.shape[0]):
        for p in range(tag_probs.shape[0]):
            total += float(word_probs[w] * (tag_given_word[w, p] + tag_probs[p]))
    return total


def model_inputs(kind: str, batch: SentenceBatch, device: torch.device) -> list[Tensor]:
    """(words, tags, suffixes, shapes) the model reads at each position of ``batch``: the
    previous token for an LM, the current word with the previous tag for the tagger."""
    if kind == "tagger":
        arrays = (
            batch.target_words.clip(min=0),
            batch.tags,
            batch.target_suffixes,
            batch.target_shapes,
        )
    else:
        arrays = (batch.words, batch.tags, batch.suffixes, batch.shapes)
    return [torch.from_numpy(a).to(device) for a in arrays]
