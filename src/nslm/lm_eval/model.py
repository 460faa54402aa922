"""An nslm run as an lm-evaluation-harness model (docs/lm-eval.md).

lm-eval asks three things of a model (``lm_eval.api.model.LM``):

- ``loglikelihood(context, continuation)``: log P(continuation | context) and whether the
  continuation is what greedy decoding gives. nslm scores whole texts, token by token
  (:class:`nslm.api.TextScore`), so it is log P(context + continuation) − log P(context),
  each a prefix's probability: the sum over the text's tokens, less the end of line a word
  LM adds after a text that does not end with one. Where the run's tokens of the context
  are a prefix of its tokens of the whole (a continuation that starts a new word: " 1914"),
  that difference is exactly the continuation's log-probability given the context.
- ``loglikelihood_rolling(document)``: log P(document), the same proper scores as
  ``nslm eval --text`` (a token outside the vocabulary charged P(<unk> | h) · P_spell; the
  first token, which no model scores, left out as nslm does).
- ``generate_until(context, until=…)``: the run's own ``generate``, greedy (top-k 1) unless
  a temperature is asked for, cut at the first stop sequence.

``model_args``: ``run`` (a run directory: NSLM, NNLM head, Transformer, byte LM, or an
n-gram model file), ``micro`` (a word LM: ``auto``, ``plain``, ``context``, ``none``; a
Transformer run: ``functions``, ``plain``, ``none``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from nslm.errors import NslmError

TRANSFORMER_MICRO = ("functions", "plain", "none")
WORD_MICRO = ("auto", "plain", "context", "none")
EOS = "<eos>"


@register_model("nslm")
class NslmLM(LM):
    """An nslm run behind lm-eval's model interface (module docstring)."""

    def __init__(self, run: str, micro: str = "auto", **_: Any) -> None:
        from nslm.api import load

        super().__init__()
        path = Path(run)
        self.kind = _kind(path)
        if self.kind == "transformer":
            micro = "functions" if micro == "auto" else micro
            if micro not in TRANSFORMER_MICRO:
                raise NslmError(f"micro={micro!r}: a Transformer run takes {TRANSFORMER_MICRO}")
            self.model = load(path)
        else:
            if micro not in WORD_MICRO:
                raise NslmError(f"micro={micro!r}: one of {WORD_MICRO}")
            self.model = load(path, micro=micro)
        if not hasattr(self.model, "score"):
            raise NslmError(f"{run}: a {self.kind} run scores no text; lm-eval needs one that does")
        self.micro = micro

    # -- what lm-eval calls --------------------------------------------------------------

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        out = []
        for request in _progress(requests, "loglikelihood", disable_tqdm):
            context, continuation = request.args
            whole = self.prefix_log_prob(context + continuation)
            before = self.prefix_log_prob(context) if context else 0.0
            out.append((whole - before, self.is_greedy(context, continuation)))
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        return [
            -self.score(request.args[0]).nats
            for request in _progress(requests, "loglikelihood_rolling", disable_tqdm)
        ]

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        out = []
        for request in _progress(requests, "generate_until", disable_tqdm):
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
        return out

    # -- how -----------------------------------------------------------------------------

    def score(self, text: str):
        if self.kind == "transformer":
            return self.model.score(
                text, micro=self.micro != "none", functions=self.micro == "functions"
            )
        return self.model.score(text)

    def prefix_log_prob(self, text: str) -> float:
        """log P(text) as a prefix: the text's tokens, less the end of line a word LM adds
        after a text that has none (a prefix goes on)."""
        scored = self.score(text)
        log_probs = scored.log_probs
        if scored.tokens and scored.tokens[-1] == EOS and not text.endswith("\n"):
            log_probs = log_probs[:-1]
        return float(sum(x for x in log_probs.tolist() if not math.isnan(x)))

    def is_greedy(self, context: str, continuation: str) -> bool:
        """Whether greedy decoding writes the continuation: each of its words (tokens) the
        run's likeliest next one after the text before it."""
        words = continuation.split()
        if not words or not hasattr(self.model, "predict"):
            return False
        text = context
        for word in words:
            top = self.model.predict(text, k=1)
            if not top or top[0].token.replace("_", " ") != word:
                return False
            joint = "" if not text or text[-1].isspace() else " "
            text = f"{text}{joint}{word}"
        return True


def _kind(path: Path) -> str:
    from nslm.runs.kinds import locate_run

    return locate_run(path, ngram=True).kind


def _progress(requests, what: str, disable: bool):
    from tqdm import tqdm

    return tqdm(requests, desc=f"nslm {what}", disable=disable)
