"""Generate text from an NSLM (paper Eq. 4): class tokens come from the micro-models.

Each step costs one backbone step on the carried state (as :mod:`nslm.generation.neural`)
plus O(V) numpy for

    P_NSLM(w | h) = P_top(w | h) + Σ_c P(c | h) · P_MM(w | c, w_prev^(c))       (Eq. 4)

i.e. :meth:`nslm.scores.distribution.FullDistribution.marginal`: the HNLM's top softmax over
(words ∪ class tags), each tag's mass spread over V_c by its micro-model (or by the HNLM's
within-class softmax, Eq. 3, for a class without one).

How a token is drawn. The Sampler's temperature / top-k / top-p act on that *marginal over
types*, so ``top_k=1`` is the argmax of the NSLM's next-token distribution. The drawn type
w is then given a reading (plain word, or class c) from the exact posterior
P(c | w, h) = P(c, w | h) / P(w | h), unfiltered (the most probable reading when greedy).
Without filters the pair (reading, w) is thus drawn from the NSLM's joint distribution,
exactly as a hierarchical draw (tag, then P_MM) would be.

Why the reading matters: a token read as class c updates the micro-model contexts
w_prev^(c) (paper Eq. 1) of every class whose context it is — the same class, or its family
with ``context = "family"`` — with its value and coordinates. After a generated ``1990`` read
as ``<year>``, the next ``<year>`` is scored relative to 1990.

The prompt is prepared as ``nslm predict`` prepares it
(:func:`nslm.generation.prompts.prompt_split`: numbers re-joined, places chunked, classes
tagged), and its class tokens seed the contexts. As in ``predict``, ``<convert>`` gets the
preceding quantity whenever the text so far ends inside ``Q unit (``, and falls back to its
class unigram elsewhere. The prompt and the continuation form one article, except that a
generated line ``= Title …`` (a top-level heading) starts a new one: the contexts are
cleared, as the corpus never looks across an article boundary (docs/data.md, "Lines,
tokens, articles")."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from nslm.data.conversions import MAX_TARGET_UNITS, pending_conversion, unit_map_from_json
from nslm.data.corpus import Split
from nslm.data.numbers import is_number, number_value
from nslm.data.vocab import EOS
from nslm.generation.prompts import prompt_split
from nslm.generation.sampling import Sampler
from nslm.micro.history import Context
from nslm.micro.model import MicroModel
from nslm.runs.load import LoadedRun
from nslm.scores.distribution import FullDistribution


@dataclass(frozen=True)
class Generated:
    """One generated token and the reading it was generated as (0 = a plain word)."""

    token_id: int
    cls: int


# tokens of history that can hold a pending ``Q unit (``: the 12-token parenthesis window of
# nslm.data.numbers.quantity_before, a unit of up to 4 tokens, and the quantity itself
LOOKBACK = 20


def _no_context() -> Context:
    return Context.from_values(np.full(1, np.nan))


class MicroContexts:
    """w_prev^(c) of every micro-model (paper Eq. 1), kept as one-row contexts and updated
    token by token: O(number of micro-models) per token, never a search of the history."""

    def __init__(self, micro: dict[str, MicroModel], unk_id: int) -> None:
        self.micro = micro
        self.unk_id = unk_id
        self._ctx = {name: _no_context() for name in micro}

    @classmethod
    def from_prompt(cls, micro: dict[str, MicroModel], split: Split, unk_id: int) -> MicroContexts:
        """The contexts at the last position of ``split`` (the slot after the prompt), found
        exactly as ``nslm predict`` and the evaluator find them."""
        out = cls(micro, unk_id)
        nxt = np.array([len(split) - 1])
        for name, mm in micro.items():
            out._ctx[name] = mm.cls.context(split, nxt, mm.context)
        return out

    def __getitem__(self, name: str) -> Context:
        return self._ctx[name]

    def clear(self) -> None:
        self._ctx = {name: _no_context() for name in self.micro}

    def set_convert_target(self, row: np.ndarray) -> None:
        """The pending ``Q unit (`` quantity for the next token (NaN row: none)."""
        for name, ctx in self._ctx.items():
            self._ctx[name] = replace(ctx, convert_target=row.reshape(1, -1).copy())

    def observe(
        self, position: int, token_id: int, cls: int, value: float, coords: np.ndarray
    ) -> None:
        """Record a token read as class ``cls``: it becomes w_prev of every class whose
        context mask marks it (the class's own rule; its family in ``family`` mode), and the
        previous quantity of every number class where it is one."""
        one = Split(
            name="step",
            token_ids=np.array([token_id], dtype=np.int32),
            rule_class_ids=np.array([cls], dtype=np.int16),
            values=np.array([value], dtype=np.float64),
            coords=np.asarray(coords, dtype=np.float64).reshape(1, 2),
            convert_targets=np.full((1, MAX_TARGET_UNITS), np.nan),
            article_ids=np.zeros(1, dtype=np.int32),
            unk_id=self.unk_id,
        )
        for name, mm in self.micro.items():
            quantity = self._ctx[name].quantity_value
            if mm.cls.family == "numbers" and mm.cls.context_mask(one, "quantity")[0]:
                quantity = one.values.copy()  # the article's previous quantity (history.py)
            if mm.cls.context_mask(one, mm.context)[0]:
                self._ctx[name] = Context(
                    prev_index=np.array([position], dtype=np.int64),
                    prev_ids=np.array([token_id], dtype=np.int64),
                    prev_value=one.values.copy(),
                    prev_coords=one.coords.copy(),
                    convert_target=np.full((1, MAX_TARGET_UNITS), np.nan),
                    quantity_value=quantity,
                )
            else:
                self._ctx[name] = replace(self._ctx[name], quantity_value=quantity)


class NslmStepper:
    """The NSLM's next-token distribution after a prompt, advanced one token at a time."""

    def __init__(
        self,
        loaded: LoadedRun,
        micro: dict[str, MicroModel],
        prompt: str,
        input_format: str = "plain",
    ) -> None:
        self.model, self.corpus = loaded.model, loaded.corpus
        self.scorer = loaded.scorer()
        self.micro = micro
        vocab = self.corpus.vocab
        self.eos_id = vocab.stoi[EOS]
        if prompt.strip():
            split, self.prompt_tokens = prompt_split(loaded, prompt, input_format=input_format)
            ids = split.token_ids[:-1].tolist()
            self.contexts = MicroContexts.from_prompt(micro, split, vocab.unk_id)
        else:  # start of a line, no class token read yet: every micro-model is its unigram
            self.prompt_tokens, ids = [], []
            self.contexts = MicroContexts(micro, vocab.unk_id)
        self.position = len(ids)  # index of the next token in the prompt's split
        # the current line's tokens, for a pending ``Q unit (`` before a <convert> number
        self._text = list(self.prompt_tokens)
        self._unit_map = unit_map_from_json(self.corpus.meta.get("unit_map", {}))
        self._type_coords = self.corpus.type_coords()
        self._line: list[int] = []  # ids of the current generated line (article headings)
        self.model.eval()
        with torch.no_grad():
            x = torch.as_tensor([self.eos_id, *ids], dtype=torch.long).unsqueeze(1)
            h, self._state = self.model.features(x, None)
        self._h = h[-1].float()  # (1, D)
        self._full: FullDistribution | None = None

    def distribution(self) -> FullDistribution:
        """Eq. 4's parts for the next token (one row); computed once per step."""
        if self._full is None:
            rows = {n: mm.log_prob(self.contexts[n], self._h) for n, mm in self.micro.items()}
            self._full = self.scorer.distribution(
                self._h, self.micro, self.corpus.class_names, rows
            )
        return self._full

    def marginal(self) -> np.ndarray:
        """log P_NSLM(w | h) over every type (V,): what the sampler draws from."""
        return self.distribution().marginal()[0]

    def readings(self, token_id: int) -> tuple[list[int], np.ndarray]:
        """The readings of a type (0 = word, else a class id) and log P(reading, w | h)."""
        readings = self.distribution().readings(0, token_id)
        return [r.cls for r in readings], np.array([r.log_prob for r in readings])

    def advance(self, token_id: int, cls: int) -> None:
        """Feed the token (read as ``cls``) to the backbone and to the micro contexts."""
        value, coords = np.nan, np.full(2, np.nan)
        string = self.corpus.vocab.itos[token_id]
        if cls > 0:
            # the type's attributes, as V_c's candidates carry them (micro.classdata)
            value = number_value(string) if is_number(string) else np.nan
            coords = self._type_coords[token_id]
        self._advance(token_id, cls, value, coords, string)

    def _advance(
        self, token_id: int, cls: int, value: float, coords: np.ndarray, string: str
    ) -> None:
        """Feed ``token_id`` to the backbone; the contexts record it as class ``cls`` with
        ``value`` and ``coords``; ``string`` is the token as written (the text so far)."""
        self._track_article(token_id)
        self.contexts.observe(self.position, token_id, cls, value, coords)
        self._text = [] if token_id == self.eos_id else [*self._text[-LOOKBACK:], string]
        self.contexts.set_convert_target(pending_conversion(self._text, self._unit_map))
        self.position += 1
        with torch.no_grad():
            x = torch.tensor([[token_id]], dtype=torch.long)
            h, self._state = self.model.features(x, self._state)
        self._h = h[-1].float()
        self._full = None

    def _track_article(self, token_id: int) -> None:
        """Clear the contexts at the second token of a generated ``= Title`` line: a
        top-level heading (``= = Section`` is not) starts a new article (docs/data.md,
        "Lines, tokens, articles")."""
        if token_id == self.eos_id:
            self._line = []
            return
        itos = self.corpus.vocab.itos
        if len(self._line) == 1 and itos[self._line[0]] == "=" and itos[token_id] != "=":
            self._new_article()
        self._line.append(token_id)

    def _new_article(self) -> None:
        """What a new article forgets: the classes' previous tokens."""
        self.contexts.clear()


def choose_reading(stepper: NslmStepper, token_id: int, sampler: Sampler) -> int:
    """The class (0 = word) the drawn type is read as: P(c | w, h), argmax when greedy."""
    classes, logp = stepper.readings(token_id)
    if len(classes) <= 1:
        return classes[0] if classes else 0
    if sampler.config.greedy:
        return classes[int(np.argmax(logp))]
    post = np.exp(logp - logp.max())
    cdf = np.cumsum(post)
    pick = int(np.searchsorted(cdf, sampler.rng.random() * cdf[-1], side="right"))
    return classes[min(pick, len(classes) - 1)]


def generate_nslm(
    loaded: LoadedRun,
    micro: dict[str, MicroModel],
    prompt: str,
    max_tokens: int,
    sampler: Sampler,
    input_format: str = "plain",
) -> list[Generated]:
    """Continue ``prompt`` by up to ``max_tokens`` NSLM draws (generated only); the prompt is
    read as :func:`~nslm.generation.prompts.prompt_split` reads it."""
    return generate_with(NslmStepper(loaded, micro, prompt, input_format), max_tokens, sampler)


def generate_with(stepper: NslmStepper, max_tokens: int, sampler: Sampler) -> list[Generated]:
    """Up to ``max_tokens`` NSLM draws from ``stepper``'s state on (generated only)."""
    out: list[Generated] = []
    for _ in range(max_tokens):
        token = sampler.sample(stepper.marginal(), log_space=True)
        cls = choose_reading(stepper, token, sampler)
        out.append(Generated(token, cls))
        stepper.advance(token, cls)
    return out
