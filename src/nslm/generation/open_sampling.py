"""Generate from NSLM-open: a class token may be a member the vocabulary never held.

:mod:`nslm.generation.nslm_sampling` draws from Eq. 4 of Demeter & Downey (2020) over the
vocabulary. With open micro-models (:mod:`nslm.micro.open_set`) each open class c splits its
mass P(c | h) between its known members, P(c | h) · P_open(w | c, ctx) for w ∈ V_c, and the
members outside the vocabulary, P(c | h) · P_open(w ∉ V_c | c, ctx). The draw is over the
vocabulary plus one outcome "a new member of c" per open class, with that second mass; a
drawn new member is then one of the class's ``n_new`` likeliest new members (the open
model's own ranking, ``top_new``, the text's cached new members among them), drawn in
proportion to P_open. That last step is a truncation, as top-k sampling is: the long tail
of O_c beyond the ``n_new`` likeliest is not drawn from.

Where the run takes its new members' mass from P(``<unk>`` | h) too (RUN/open.json's
``new_mass``, :class:`nslm.micro.unk_share.NewMass`), the outcome "a new member of c" also
gets ρ_c · P(<unk> | h) and the unknown word keeps (1 − Σρ) of it; within the class the
member is drawn as before (both shares are in proportion to P_open over the new members).
With ``unk`` alone the known members keep the closed micro-model's P_MM.

What follows a new member: the LM reads it as it reads any unseen token (``<unk>``, as in
scoring), and its class's context w_prev^(c) becomes its value (a year, a count) or its
coordinates (a place), so the next year after a generated 2031 is scored relative to 2031.
The class's cache of new members (:mod:`nslm.micro.open_cache`) counts it too. Without any
open class the draws are those of :class:`~nslm.generation.nslm_sampling.NslmStepper`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from nslm.data.numbers import is_number, number_value
from nslm.generation.nslm_sampling import NslmStepper, choose_reading
from nslm.generation.sampling import Sampler
from nslm.micro.logspace import log1mexp, logsumexp
from nslm.micro.model import MicroModel
from nslm.micro.open_cache import TextCache
from nslm.micro.open_set import OpenMicroModel
from nslm.micro.unk_share import NewMass
from nslm.runs.load import LoadedRun

N_NEW = 100  # a drawn new member is one of its class's this-many likeliest
FILTER_MARGIN = 15.0  # nats: see OpenNslmStepper.draw


@dataclass(frozen=True)
class OpenGenerated:
    """One generated token: a vocabulary type (``token_id``) or a new member (``string``,
    with ``token_id`` the unknown word the LM reads); ``cls`` its reading (0 = a word)."""

    token_id: int
    cls: int
    string: str | None = None

    @property
    def new(self) -> bool:
        return self.string is not None


class OpenNslmStepper(NslmStepper):
    """:class:`NslmStepper` whose open classes also spread mass over their new members."""

    def __init__(
        self,
        loaded: LoadedRun,
        micro: dict[str, MicroModel],
        open_models: dict[str, OpenMicroModel],
        prompt: str,
        input_format: str = "plain",
        n_new: int = N_NEW,
        new_mass: NewMass | None = None,
    ) -> None:
        from nslm.runs.open_micro import run_new_mass

        # the open classes' contexts follow their own micro-model (its V_c, its context mode)
        with_open = {**micro, **{n: om.micro for n, om in open_models.items()}}
        super().__init__(loaded, with_open, prompt, input_format)
        self.open_models = open_models
        self.n_new = n_new
        self.names = tuple(self.corpus.class_names)
        self.caches = self._prompt_caches(loaded, prompt, input_format)
        self.new_mass = new_mass if new_mass is not None else run_new_mass(loaded)
        self._new_mass: dict[str, float] = {}
        self._log_new: dict[str, float] = {}  # log P_open(w ∉ V_c | c, ctx) this step

    def _prompt_caches(self, loaded, prompt: str, input_format: str) -> dict[str, Counter]:
        """The new members each open class's cache holds after the prompt."""
        if not prompt.strip():
            return {name: Counter() for name in self.open_models}
        from nslm.generation.prompts import prompt_split

        split, tokens = prompt_split(loaded, prompt, input_format=input_format)
        text, slot = [*tokens, ""], np.array([len(split) - 1])
        return {
            name: om.text_cache(split, text, slot).counts[0]
            for name, om in self.open_models.items()
        }

    def _cache(self, name: str) -> TextCache:
        return TextCache([self.caches[name]])

    def _states(self, om: OpenMicroModel):
        """The LM state a gated open model reads (None for an ungated one)."""
        return self._h if om.needs_features else None

    def distribution(self):
        if self._full is None:
            rows = {}
            for name, mm in self.micro.items():
                om = self.open_models.get(name)
                if om is None or not self.new_mass.escape:
                    rows[name] = mm.log_prob(self.contexts[name], self._h)
                else:  # P_open over V_c: the new members' share is left out of these rows
                    ctx = self.contexts[name]
                    rows[name] = om.log_prob_known(ctx, self._states(om), self._cache(name))
            self._full = self.scorer.distribution(self._h, self.micro, self.names, rows)
            self._new_mass = self._new_masses(rows)
        return self._full

    def marginal(self) -> np.ndarray:
        """log P over every type (V,), the unknown word keeping (1 − Σρ) of P(<unk> | h)
        where the classes' new members share it."""
        out = np.array(super().marginal(), dtype=np.float64, copy=True)
        out[self.corpus.vocab.unk_id] += self.new_mass.log_spelled
        return out

    def _new_masses(self, rows: dict[str, np.ndarray]) -> dict[str, float]:
        """Per open class with a tag and new members: log P(c | h) + log P_open(w ∉ V_c |
        c, ctx) (the escape's), plus log ρ_c + log P(<unk> | h) where the class shares
        P(<unk> | h)."""
        out = {}
        log_unk = float(self._full.marginal()[0, self.corpus.vocab.unk_id])
        for name, om in self.open_models.items():
            c = self.names.index(name)
            if c not in self._full.within:  # a class the LM never tags
                continue
            if self.new_mass.escape:  # the rows are P_open over V_c: the rest is new
                known = min(float(logsumexp(rows[name][0])), 0.0)
                log_new = float(log1mexp(np.array(known)))
            else:
                ctx = self.contexts[name]
                log_new = float(om.log_new_mass(ctx, self._states(om), self._cache(name))[0])
            self._log_new[name] = log_new
            if not np.isfinite(log_new):  # nothing outside V_c here
                continue
            mass = float(self._full.tag[0, c]) + log_new if self.new_mass.escape else -np.inf
            mass = float(np.logaddexp(mass, log_unk + self.new_mass.log_rho(name)))
            if np.isfinite(mass):
                out[name] = mass
        return out

    def _member_scores(self, name: str, members: list[tuple[str, float]]) -> np.ndarray:
        """log P(the next token is each listed new member of ``name``): the class's new
        mass spread in proportion to P_open over its new members."""
        log_new = self._log_new[name]
        if not np.isfinite(log_new):  # no new member has any mass here
            return np.full(len(members), -np.inf)
        return np.array([self._new_mass[name] + lp - log_new for _, lp in members])

    def new_members(self, name: str) -> list[tuple[str, float]]:
        """The ``n_new`` likeliest new members of open class ``name`` with log P_open."""
        om, ctx = self.open_models[name], self.contexts[name]
        return om.top_new(ctx, self.n_new, self._states(om), self._cache(name))[0]

    def draw(self, sampler: Sampler) -> OpenGenerated:
        """One token: a vocabulary type or a new member (module docstring). Without a filter
        (temperature 1, no top-k or top-p) the draw is in two stages, the new members of a
        class as one outcome first; a filter acts on single tokens, so then each class's
        listed new members are outcomes of their own (classes whose whole new mass is
        :data:`FILTER_MARGIN` nats below the likeliest token are left out: none of their
        members could pass a filter)."""
        marginal = self.marginal()
        cfg = sampler.config
        if cfg.temperature == 1.0 and cfg.top_k is None and cfg.top_p == 1.0:
            return self._draw_in_stages(marginal, sampler)
        best = float(np.max(marginal))
        outcomes: list[tuple[str, str]] = []
        scores = [marginal]
        for name, mass in self._new_mass.items():
            if mass < best - FILTER_MARGIN:
                continue
            members = self.new_members(name)
            outcomes += [(name, string) for string, _ in members]
            scores.append(self._member_scores(name, members))
        pick = sampler.sample(np.concatenate(scores), log_space=True)
        if pick < len(marginal):
            return OpenGenerated(pick, choose_reading(self, pick, sampler))
        name, string = outcomes[pick - len(marginal)]
        return OpenGenerated(self.corpus.vocab.unk_id, self.names.index(name), string)

    def _draw_in_stages(self, marginal: np.ndarray, sampler: Sampler) -> OpenGenerated:
        """A type or one class's "new member" outcome, then (for the latter) one of its
        listed new members in proportion to P_open."""
        names = list(self._new_mass)
        scores = np.concatenate([marginal, [self._new_mass[n] for n in names]])
        pick = sampler.sample(scores, log_space=True)
        if pick < len(marginal):
            return OpenGenerated(pick, choose_reading(self, pick, sampler))
        name = names[pick - len(marginal)]
        members = self.new_members(name)
        unk, cls = self.corpus.vocab.unk_id, self.names.index(name)
        if not members:  # nothing listed beyond V_c: the unknown word, as a word
            return OpenGenerated(unk, 0)
        weights = np.array([lp for _, lp in members])
        cdf = np.cumsum(np.exp(weights - logsumexp(weights)))
        choice = int(min(np.searchsorted(cdf, sampler.rng.random() * cdf[-1]), len(cdf) - 1))
        return OpenGenerated(unk, cls, members[choice][0])

    def advance_new(self, drawn: OpenGenerated) -> None:
        """Feed a new member: the LM reads ``<unk>``, its class's context takes its value or
        coordinates, and its class's cache counts it."""
        name = self.names[drawn.cls]
        string = drawn.string or ""
        om = self.open_models[name]
        value = number_value(string) if is_number(string) else np.nan
        coords = np.full(2, np.nan)
        listed = getattr(om.base, "index", {})  # a listed O_c (years, places) has attributes
        if string in listed:
            at = listed[string]
            value = float(om.base.values[at]) if np.isnan(value) else value
            coords = np.asarray(om.base.coords[at], dtype=float)
        self.caches[name][string] += 1
        self._advance(drawn.token_id, drawn.cls, value, coords, string)

    def _new_article(self) -> None:
        super()._new_article()
        for counts in self.caches.values():  # the cache never looks across articles either
            counts.clear()


def generate_open(
    stepper: OpenNslmStepper, max_tokens: int, sampler: Sampler
) -> list[OpenGenerated]:
    """Up to ``max_tokens`` draws of NSLM-open from ``stepper``'s state on (generated only)."""
    out: list[OpenGenerated] = []
    for _ in range(max_tokens):
        drawn = stepper.draw(sampler)
        out.append(drawn)
        if drawn.new:
            stepper.advance_new(drawn)
        else:
            stepper.advance(drawn.token_id, drawn.cls)
    return out
