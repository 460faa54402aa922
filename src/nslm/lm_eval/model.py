"""An nslm run as an lm-evaluation-harness model (docs/lm-eval.md).

lm-eval asks three things of a model (``lm_eval.api.model.LM``):

- ``loglikelihood(context, continuation)``: log P(continuation | context) and whether the
  continuation is what greedy decoding writes. A word LM, a byte LM or an n-gram model
  scores whole texts (:class:`nslm.api.TextScore`), so there it is log P(context +
  continuation) − log P(context), each a prefix's probability: the sum over the text's
  tokens, less the end of line a word LM adds after a text that does not end with one.
  Where the run's tokens of the context are a prefix of its tokens of the whole (a
  continuation that starts a new word: " 1914"), that difference is exactly the
  continuation's log-probability given the context. A Transformer run scores the whole
  text once and sums the log-probabilities of the tokens that start at or after the
  context's end (the difference of two prefixes where a token straddles it).
- ``loglikelihood_rolling(document)``: log P(document), the same proper scores as
  ``nslm eval --text`` (a token outside the vocabulary charged P(<unk> | h) · P_spell; the
  first token, which no model scores, left out as nslm does).
- ``generate_until(context, until=…)``: the run's own ``generate``, greedy (top-k 1) unless
  a temperature is asked for, cut at the first stop sequence.

Requests that share a context (a multiple-choice item's choices) are answered together:
the context is scored once, and greedy decoding from it runs once, step by step, for as
long as it still agrees with one of the choices.

``model_args``: ``run`` (a run directory: NSLM, NNLM head, Transformer, byte LM, or an
n-gram model file or directory), ``micro`` (a word LM: ``auto``, ``plain``, ``context``,
``none``; a Transformer run: ``auto``, ``functions``, ``plain``, ``none``).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from nslm.data.text import EOS_TOKENS
from nslm.errors import NslmError

WORD_MICRO = ("auto", "plain", "context", "none")
# Transformer passes of short texts (a choice after its context) kept in this process, so
# that the same run loaded with another ``micro`` reads a text's pass once
PASSES_KEPT = 20_000
_passes: OrderedDict[tuple[str, str], Any] = OrderedDict()
# and the Transformer's keys and values of each context (~4 MB each for SmolLM2-135M at 80
# tokens), which greedy decoding from it starts from
CONTEXTS_KEPT = 1_300
_contexts: OrderedDict[tuple[str, str], Any] = OrderedDict()


@register_model("nslm")
class NslmLM(LM):
    """An nslm run behind lm-eval's model interface (module docstring)."""

    def __init__(self, run: str, micro: str = "auto", **_: Any) -> None:
        from nslm.api import load

        super().__init__()
        path = Path(run)
        self.kind = _kind(path)
        if self.kind != "transformer" and micro not in WORD_MICRO:
            raise NslmError(f"micro={micro!r}: one of {WORD_MICRO}")
        self.model = load(path, micro=micro)
        if not hasattr(self.model, "score"):
            raise NslmError(f"{run}: a {self.kind} run scores no text; lm-eval needs one that does")
        self.micro = micro

    # -- what lm-eval calls --------------------------------------------------------------

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        out: list[tuple[float, bool] | None] = [None] * len(requests)
        by_context: dict[str, list[int]] = {}
        for i, request in enumerate(requests):
            by_context.setdefault(request.args[0], []).append(i)
        with _bar(len(requests), "loglikelihood", disable_tqdm) as bar:
            for context, indices in by_context.items():
                continuations = [requests[i].args[1] for i in indices]
                log_probs = self.continuation_log_probs(context, continuations)
                greedy = self.greedy(context, continuations)
                for i, lp, g in zip(indices, log_probs, greedy, strict=True):
                    out[i] = (lp, g)
                bar.update(len(indices))
        return out  # type: ignore[return-value]

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        out = []
        with _bar(len(requests), "loglikelihood_rolling", disable_tqdm) as bar:
            for request in requests:
                out.append(-self.model.score(request.args[0]).nats)
                bar.update(1)
        return out

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        if not hasattr(self.model, "generate"):
            raise NslmError(f"a {self.kind} run generates no text: generate_until is not served")
        out = []
        with _bar(len(requests), "generate_until", disable_tqdm) as bar:
            for request in requests:
                context, kwargs = request.args
                until = kwargs.get("until") or []
                until = [until] if isinstance(until, str) else list(until)
                temperature = float(kwargs.get("temperature", 0.0))
                length = int(kwargs.get("max_gen_toks", 64))
                if temperature > 0:
                    text = self.model.generate(context, length, temperature=temperature, seed=0)
                else:
                    text = self.model.generate(context, length, top_k=1, seed=0)
                text = text[len(context) :] if text.startswith(context) else text
                for stop in until:
                    if stop and stop in text:
                        text = text[: text.index(stop)]
                out.append(text)
                bar.update(1)
        return out

    # -- log-probabilities ---------------------------------------------------------------

    def continuation_log_probs(self, context: str, continuations: Sequence[str]) -> list[float]:
        """log P(continuation | context) for each continuation (module docstring)."""
        if self.kind == "transformer":
            self._transformer_parts_after(context, continuations)
            return [self._transformer_continuation(context, c) for c in continuations]
        before = self.prefix_log_prob(context) if context else 0.0
        return [self.prefix_log_prob(context + c) - before for c in continuations]

    def prefix_log_prob(self, text: str) -> float:
        """log P(text) as a prefix: the text's tokens, less the end of line a word LM adds
        after a text that has none (a prefix goes on)."""
        if self.kind == "transformer":
            return float(np.sum(self._transformer_scored(text).log_probs))
        scored = self.model.score(text)
        log_probs = scored.log_probs
        if scored.tokens and scored.tokens[-1] in EOS_TOKENS and not text.endswith("\n"):
            log_probs = log_probs[:-1]
        return float(sum(x for x in log_probs.tolist() if not math.isnan(x)))

    def _transformer_parts(self, text: str) -> Any:
        from nslm.transformer.commands import mixture_parts

        key = (str(self.model.path), text)
        parts = _passes.get(key)
        if parts is None:
            parts = mixture_parts(self.model.run, text, keep=False)
            _keep(_passes, key, parts, PASSES_KEPT)
        return parts

    def _transformer_parts_after(self, context: str, continuations: Sequence[str]) -> None:
        """The passes of ``context + c`` for the continuations not yet read, the context
        read once where it can be (:func:`nslm.transformer.commands.mixture_parts_after`)."""
        from nslm.transformer.commands import mixture_parts_after

        run = str(self.model.path)
        todo = [c for c in dict.fromkeys(continuations) if (run, context + c) not in _passes]
        if len(todo) < 2 or not context:
            return
        got = mixture_parts_after(self.model.run, context, todo)
        if got is None:
            return
        for c, parts in zip(todo, got[0], strict=True):
            _keep(_passes, (run, context + c), parts, PASSES_KEPT)
        _keep(_contexts, (run, context), got[1], CONTEXTS_KEPT)

    def _transformer_scored(self, text: str):
        return self.model.score_parts(self._transformer_parts(text))

    def _transformer_continuation(self, context: str, continuation: str) -> float:
        parts = self._transformer_parts(context + continuation)
        log_probs = self.model.score_parts(parts).log_probs
        starts, ends = parts.text_pass.offsets[:, 0], parts.text_pass.offsets[:, 1]
        cut = len(context)
        if np.any((starts < cut) & (ends > cut)):  # a token straddles the context's end
            return float(np.sum(log_probs)) - (self.prefix_log_prob(context) if context else 0)
        return float(np.sum(log_probs[starts >= cut]))

    # -- greedy decoding -----------------------------------------------------------------

    def greedy(self, context: str, continuations: Sequence[str]) -> list[bool]:
        """Whether greedy decoding from ``context`` writes each continuation: every one of
        its units (a Transformer's tokens, a byte LM's bytes, a word LM's words) the
        run's likeliest next one after the text before it. One decoding serves every
        continuation; it stops where it leaves all of them."""
        if self.kind == "transformer":
            return self._transformer_greedy(context, continuations)
        if self.kind == "byte":
            units = [list(c.encode("utf-8")) for c in continuations]
        else:
            units = [c.split() for c in continuations]
        written: list = []
        text = context
        while _goes_on(units, written):
            top = self.model.predict(text, k=1)
            if not top:
                break
            if self.kind == "byte":
                unit = _byte_of(top[0].token)
                written.append(unit)
                if unit >= 128:  # a piece of a character: the prompt is text, so stop here
                    break
                text += chr(unit)
            else:
                unit = top[0].token.replace("_", " ")
                written.append(unit)
                text = f"{text}{'' if not text or text[-1].isspace() else ' '}{unit}"
        return [bool(u) and u == written[: len(u)] for u in units]

    def _transformer_greedy(self, context: str, continuations: Sequence[str]) -> list[bool]:
        from nslm.transformer.generate import MixtureStepper

        run = self.model.run
        tokenizer = run.bundle.checkpoint.tokenizer
        before = tokenizer.encode(context, add_special_tokens=False).ids
        targets = []
        for c in continuations:
            whole = tokenizer.encode(context + c, add_special_tokens=False).ids
            same = whole[: len(before)] == before
            targets.append(
                whole[len(before) :] if same else tokenizer.encode(c, add_special_tokens=False).ids
            )
        stepper = MixtureStepper(
            run,
            context,
            micro=self.model.micro,
            functions=self.model.functions,
            kept=_contexts.get((str(self.model.path), context)),
        )
        written: list[int] = []
        while _goes_on(targets, written):
            token = int(np.argmax(stepper.distribution()))
            written.append(token)
            if _goes_on(targets, written):
                stepper.advance(token)
        return [bool(t) and t == written[: len(t)] for t in targets]


def _goes_on(units: Sequence[Sequence], written: Sequence) -> bool:
    """Whether greedy decoding, having written ``written``, is still inside a continuation
    that has more units to come."""
    return any(list(u[: len(written)]) == list(written) and len(u) > len(written) for u in units)


def _keep(cache: OrderedDict, key: tuple[str, str], value: Any, bound: int) -> None:
    """``value`` kept under ``key``, the oldest entries dropped past ``bound``."""
    cache[key] = value
    while len(cache) > bound:
        cache.popitem(last=False)


def _byte_of(name: str) -> int:
    """A byte LM's prediction back to its byte: a printable character or ``\\xNN``."""
    return int(name[2:], 16) if name.startswith("\\x") and len(name) == 4 else ord(name)


def _kind(path: Path) -> str:
    from nslm.runs.kinds import locate_run

    return locate_run(path, ngram=True).kind


def _bar(total: int, what: str, disable: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=f"nslm {what}", disable=disable)
