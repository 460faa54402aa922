"""Sampling from the Transformer with micro-models, token by token.

The mixture of :mod:`nslm.transformer.mixture` is a distribution over the Transformer's
next token at every step of its walk over the members' trie, :func:`~nslm.transformer.
mixture.node_distribution`; :class:`MixtureStepper` keeps that walk's state as tokens are
drawn (or forced: :meth:`MixtureStepper.advance` takes any token) and gives the next
token's distribution. At a root it reads the class head's P(c | h) and each micro-model at
the text so far (:func:`~nslm.transformer.predict.micro_at_end`); while the tokens stay on
the trie it carries the root's Q(w) and 1 − G; where a member's word may end, the next
root's distribution is computed at the same state, with that member as the word before.

A generated text is therefore a sample of the same distribution that ``nslm eval RUN
--text`` scores, and ``temperature``, ``top_k`` and ``top_p`` filter it token by token, as
they filter an LSTM NSLM's marginal over words (:mod:`nslm.generation.nslm_sampling`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from nslm.generation.sampling import Sampler
from nslm.transformer.candidates import Members, Spelling
from nslm.transformer.mixture import _ends_word, node_distribution
from nslm.transformer.predict import micro_at_end
from nslm.transformer.run import TransformerRun
from nslm.transformer.scoring import combine, gate


@dataclass
class Root:
    """A root of the walk: the spelling its members use, log(1 − G) and log Q(w) there,
    and the member whose word ended right before it (None: no member)."""

    spelling: Spelling
    log_keep: float
    log_q: np.ndarray
    after: tuple[Spelling, int] | None = None
    members: Members | None = None  # the root's members: the run's and its functions' strings


class MixtureStepper:
    """The walk of the mixture over a growing text: ``distribution()`` is the next token's
    log-distribution over the Transformer's vocabulary; ``advance(token)`` appends a token."""

    def __init__(
        self,
        run: TransformerRun,
        prompt: str = "",
        *,
        micro: bool = True,
        functions: bool = True,
        kept: Any = None,
    ) -> None:
        """``kept``: the Transformer's keys and values of the start token and the prompt's
        tokens but the last (:func:`nslm.transformer.backbone.score_after`), read already;
        the stepper then reads the last token alone."""
        self.run = run
        self.lams = run.lams if micro else {}
        self.functions = (
            micro and functions and run.functions is not None and any(run.function_weights.values())
        )
        tokenizer = run.bundle.checkpoint.tokenizer
        self.ids = [run.bundle.checkpoint.start_id]
        self.ids += tokenizer.encode(prompt, add_special_tokens=False).ids
        self.text = prompt
        self.root: Root | None = None  # None: the next token starts a new root
        self.seq: list[int] = []  # the tokens since the root (on the trie)
        self.prefix = 0.0  # log P_T of those tokens
        # this step's Transformer row, the member that may end here and the root after it,
        # and the distribution
        self._step: tuple[np.ndarray, int | None, Root | None, np.ndarray] | None = None
        # the Transformer's keys and values, the window's start in ids and how far it is read
        self._cache, self._start, self._read = None, 0, 0
        if kept is not None and len(self.ids) > 1 and self._window_start() == 0:
            self._cache, self._read = copy.deepcopy(kept), len(self.ids) - 1

    def _window_start(self) -> int:
        """Where the scoring pass's window that predicts the next token starts in the ids
        (:func:`nslm.transformer.backbone.windows`: target k, the token after ids[k], is
        read in the first window while k < window − 1, then in window j ≥ 1 from j·stride
        for (j − 1)·stride + window − 1 ≤ k)."""
        window, stride = self.run.bundle.window, self.run.bundle.stride
        target = len(self.ids) - 1
        return 0 if target < window - 1 else ((target - window + 1) // stride + 1) * stride

    def _state(self) -> tuple[np.ndarray, np.ndarray]:
        """The Transformer's log-distribution of the next token and its state h, read in the
        scoring pass's windows, h rounded to float16 as that pass keeps it
        (:class:`nslm.transformer.backbone.Scores`), so that a sampled text's scores are
        those it was drawn with. The keys and values of the window's tokens read so far are
        kept: a step reads its new token only, and a new window its tokens afresh."""
        import torch

        model = self.run.bundle.model
        start = self._window_start()
        if start != self._start or self._cache is None:
            self._cache, self._start, self._read = None, start, start
        new = torch.as_tensor([self.ids[self._read :]])
        with torch.inference_mode():
            out = model.model(input_ids=new, cache=self._cache, use_cache=True)
            h = out.last_hidden_state[0, -1]
            row = model.lm_head(h).double().log_softmax(-1).numpy()
        self._cache, self._read = out.cache, len(self.ids)
        return row, h.float().numpy().astype(np.float16).astype(np.float32)

    def _root_here(self, h: np.ndarray, after: tuple[Spelling, int] | None) -> Root:
        """The root at the text's end: the micro-models' Q and, where the run's functions
        fire there, their strings as members (:mod:`nslm.transformer.functions`)."""
        from nslm.transformer.sites import number_mass, prompt_site

        run = self.run
        head_lp = run.head.log_probs(h[None, :])
        log_mm = micro_at_end(run, self.text, h) if self.lams else {}
        log_q = combine(run.members, run.class_names, head_lp, log_mm, self.lams)[0]
        with np.errstate(divide="ignore"):
            log_gate = float(gate(head_lp, run.class_names, self.lams)[0]) if self.lams else -np.inf
        log_keep = float(np.log1p(-np.exp(log_gate)))
        members = run.members
        site = prompt_site(run, self.text) if self.functions else None
        if site is not None:
            number = float(number_mass(head_lp, run.class_names)[0])
            root = site.root(run.function_weights, number)
            members, log_q, log_keep = root.members, root.log_q(log_q), root.log_keep(log_keep)
        spelling = members.spelling(self.text[-1] if self.text else None)
        return Root(spelling, log_keep, log_q, after, members)

    def _matched(self, tokens: list[int]) -> np.ndarray:
        """Per member of the root's spelling: how many leading tokens of ``tokens`` match."""
        return self.root.spelling.matches(np.asarray(tokens, dtype=np.int64))

    def distribution(self) -> np.ndarray:
        """log P(next token) under the mixture (the Transformer's alone with ``micro=False``)."""
        if self._step is not None:  # asked again before a token was appended
            return self._step[3]
        row, h = self._state()
        if self.root is None:
            self.root = self._root_here(h, None)
        root, depth = self.root, len(self.seq)
        match = self._matched(self.seq) if depth else np.zeros(len(root.log_q), np.int64)
        # a member whose tokens the walk has just completed: its word may end here
        done = np.flatnonzero((match >= depth) & (root.spelling.lengths == depth)) if depth else ()
        ending = int(done[0]) if len(done) else None
        following, nxt = None, None
        if ending is not None:
            nxt = self._root_here(h, (root.spelling, ending))
            none = np.zeros(len(nxt.log_q), np.int64)
            following = node_distribution(
                row,
                nxt.members,
                nxt.spelling,
                none,
                0,
                0.0,
                nxt.log_keep,
                nxt.log_q,
                nxt.after,
            )
        dist = node_distribution(
            row,
            root.members,
            root.spelling,
            match,
            depth,
            self.prefix,
            root.log_keep,
            root.log_q,
            root.after,
            following,
        )
        self._step = (row, ending, nxt, dist)
        return dist

    def advance(self, token: int) -> None:
        """Append ``token`` (after :meth:`distribution`) and move the walk as
        :func:`nslm.transformer.mixture.walk` would over the text."""
        if self._step is None:
            self.distribution()
        row, ending, nxt, _ = self._step
        if ending is not None and _ends_word(self.root.members, self.root.spelling, ending, token):
            self.root, self.seq, self.prefix = nxt, [], 0.0  # the token starts the next root
        if (self._matched([*self.seq, token]) > len(self.seq)).any():  # still on the trie
            self.seq.append(token)
            self.prefix += float(row[token])
        else:  # the text leaves the trie: "no member", and the next token is a new root
            self.root, self.seq, self.prefix = None, [], 0.0
        self.ids.append(token)
        self.text = self.run.bundle.checkpoint.tokenizer.decode(
            self.ids[1:], skip_special_tokens=False
        )
        self._step = None


@dataclass(frozen=True)
class Sample:
    """A generated continuation: its text, its Transformer tokens and the log-probability
    of each under the distribution it was drawn from (before sampling's filters)."""

    text: str
    tokens: tuple[int, ...]
    log_probs: np.ndarray


def generate(
    run: TransformerRun,
    prompt: str,
    max_tokens: int,
    sampler: Sampler,
    *,
    micro: bool = True,
    functions: bool = True,
) -> Sample:
    """Up to ``max_tokens`` Transformer tokens after ``prompt``, drawn from the mixture
    (``functions=False``: without the run's functions; ``micro=False``: from the Transformer
    alone); a document boundary ends the text."""
    stepper = MixtureStepper(run, prompt, micro=micro, functions=functions)
    start = len(stepper.ids)
    stop = run.bundle.checkpoint.start_id
    log_probs = []
    for _ in range(max_tokens):
        dist = stepper.distribution()
        token = sampler.sample(dist, log_space=True)
        if token == stop:
            break
        log_probs.append(float(dist[token]))
        stepper.advance(token)
    tokens = tuple(stepper.ids[start:])
    text = run.bundle.checkpoint.tokenizer.decode(list(tokens), skip_special_tokens=False)
    return Sample(text, tokens, np.asarray(log_probs))
