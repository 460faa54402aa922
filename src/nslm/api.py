"""The Python API: one call opens a model and returns the object for its kind.

    import nslm
    lm = nslm.load("runs/wt2-cpu")  # an NslmRun (or NumeralRun, ByteRun, WordPosRun, NgramLM)
    lm.predict("The war began in 1914, and ended in", k=5)
    lm.score("It opened in 1998.").bits_per_byte

Every object takes and gives plain text (:mod:`nslm.data.text` tokenizes it by the model's own
rules) and has the methods its kind supports: ``score`` (a text's proper log-probabilities and
its bits per byte), ``predict`` (the likeliest next tokens), ``generate`` (a sampled
continuation) and ``evaluate`` (a split of the corpus it was trained on). The kind is decided
once, by :func:`nslm.runs.kinds.locate_run`; the CLI opens runs the same way. docs/python.md
shows each kind in a few lines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from nslm.errors import NslmError
from nslm.generation.sampling import Sampler, SamplingConfig
from nslm.perplexity import perplexity
from nslm.runs.kinds import RunRef, locate_run
from nslm.runs.open import OpenRun, open_run

# a Transformer run's mixtures: with the functions ("auto", "functions"), the micro-models
# alone ("plain"), the Transformer alone ("none")
TRANSFORMER_MICRO = ("auto", "functions", "plain", "none")


@dataclass(frozen=True)
class Prediction:
    """One next token and its probability. ``readings``: for the NSLM, how the token comes
    about (as a word, or as class × micro-model member; :func:`nslm.generation.predict.
    breakdown`); empty for the other kinds."""

    token: str
    p: float
    readings: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class TextScore:
    """A text scored by a model: its tokens as the model read them, the natural-log
    probability of each (NaN: the first token, which no model scores), and the
    tokenization-free figures. ``log_probs`` are proper (a token outside the vocabulary
    is charged P(<unk> | h) · P_spell(s | s ∉ V), docs/text.md), so the figures compare
    across models."""

    tokens: tuple[str, ...]
    log_probs: np.ndarray = field(repr=False)
    bytes: int
    words: int

    @property
    def nats(self) -> float:
        """−ln P of the text (over its scored tokens)."""
        return -float(np.nansum(self.log_probs))

    @property
    def bits_per_byte(self) -> float:
        return self.nats / math.log(2) / max(self.bytes, 1)

    @property
    def word_perplexity(self) -> float:
        return math.exp(min(self.nats / max(self.words, 1), 700.0))

    @property
    def perplexity(self) -> float:
        """Per token, in the model's own tokens (depends on its tokenization)."""
        return perplexity(self.log_probs)


def _top(log_probs: np.ndarray, itos: list[str], k: int) -> list[Prediction]:
    order = np.argsort(-log_probs, kind="stable")[:k]
    return [Prediction(itos[w], math.exp(float(log_probs[w]))) for w in order.tolist()]


Generated = TypeVar("Generated")


class _Generates(Generic[Generated]):
    """The one ``generate`` of every kind that samples text: the sampling settings of ``nslm
    generate`` become a :class:`~nslm.generation.sampling.Sampler`, and the kind's own
    ``_generate`` draws with it."""

    default_max_tokens = 50  # generate's length when not given, in the kind's tokens

    def generate(
        self,
        prompt: str = "",
        max_tokens: int | None = None,
        *,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> Generated:
        """``prompt`` and a continuation of ``max_tokens`` sampled tokens (when None, the
        kind's ``default_max_tokens``: 200 bytes for a byte LM, else 50), as plain text, or
        for a word+POS LM as (word, tag) pairs; each kind's ``_generate`` says how it draws."""
        config = SamplingConfig(temperature=temperature, top_k=top_k, top_p=top_p)
        length = self.default_max_tokens if max_tokens is None else max_tokens
        return self._generate(prompt, length, Sampler(config, seed=seed))

    def _generate(self, prompt: str, max_tokens: int, sampler: Sampler) -> Generated:
        raise NotImplementedError


class _TrainedRun:
    """A run opened by :func:`~nslm.runs.open.open_run`: its ``loaded`` model and corpus."""

    def __init__(self, opened: OpenRun) -> None:
        self.opened = opened
        self.loaded = opened.loaded

    @property
    def path(self) -> Path:
        return self.opened.run_dir


class NslmRun(_TrainedRun, _Generates[str]):
    """A word LM trained by ``nslm train``; with its micro-models fitted (``nslm micro fit
    RUN``), the NSLM of Eq. 4 mixed with the NNLM at the run's saved Global λ (the last
    ``nslm eval``'s; 0 without one), else its NNLM head alone."""

    kind = "nslm"

    def __init__(self, opened: OpenRun) -> None:
        super().__init__(opened)
        self._open: dict[str, Any] | None = None

    @property
    def has_micro(self) -> bool:
        return self.opened.has_micro

    def score(self, text: str, *, input_format: str = "plain") -> TextScore:
        """``text`` scored token by token (the NSLM's ensemble when the run has micro-models)."""
        from nslm.data.fixed_vocab import prepare_text
        from nslm.evaluation.text_scores import proper
        from nslm.scores.spelling import fit_spelling

        prepared = prepare_text(self.loaded.corpus, text, input_format=input_format)
        log_probs = self._log_probs(prepared.split)
        full = proper(log_probs, prepared, fit_spelling(self.loaded.corpus))
        return TextScore(prepared.strings, full, prepared.plain_bytes, prepared.plain_words)

    def _log_probs(self, split) -> np.ndarray:
        scorer = self.loaded.scorer()
        if not self.has_micro:
            return scorer.score(split, ("nnlm",)).nnlm
        return scorer.nslm(split, self.opened.micro).ensemble(self.opened.lam)

    def predict(self, prompt: str, k: int = 10, *, input_format: str = "plain") -> list[Prediction]:
        """The ``k`` likeliest next tokens after ``prompt``, with each one's readings (the
        run's functions mixed into the number classes where it has RUN/functions.json)."""
        from nslm.functions.run import run_adjuster
        from nslm.generation.predict import predict

        got = predict(
            self.loaded,
            self.opened.micro,
            prompt,
            k=k,
            lam=self.opened.lam,
            input_format=input_format,
            adjust=run_adjuster(self.loaded),
        )
        rows = got["nslm"] if self.has_micro else got["nnlm"]
        return [Prediction(r["token"], r["p"], tuple(r.get("breakdown", ()))) for r in rows]

    def _generate(self, prompt: str, max_tokens: int, sampler: Sampler) -> str:
        """``prompt`` and a sampled continuation, as plain text: class tokens from the
        micro-models when the run has them, and from NSLM-open, which can name a year, a count
        or a place the vocabulary never held, when the run has open micro-models
        (RUN/open.json; :mod:`nslm.generation.open_sampling`)."""
        from nslm.data.text import to_plain
        from nslm.data.vocab import EOS

        itos = self.loaded.corpus.vocab.itos
        if self.has_micro:
            tokens, words = self._generate_nslm(prompt, max_tokens, sampler)
        else:
            from nslm.data.text import prompt_line
            from nslm.generation.neural import generate_neural

            line = prompt_line(prompt, self.opened.text_form, "plain") if prompt.strip() else ""
            tokens = line.split()
            vocab = self.loaded.corpus.vocab
            ids = generate_neural(
                self.loaded.model,
                [int(i) for i in vocab.encode(tokens)],
                max_tokens,
                sampler,
                head=self.loaded.cfg.heads[0],
                eos_id=vocab.stoi[EOS],
            )
            words = [itos[i] for i in ids]
        text = ["</s>" if w == EOS else w for w in [*tokens, *words]]
        return to_plain(text, self.opened.text_form)

    def _generate_nslm(self, prompt: str, max_tokens: int, sampler: Sampler):
        """(the prompt's tokens, the generated ones): NSLM-open where the run has it."""
        from nslm.generation.nslm_sampling import NslmStepper, generate_with

        itos = self.loaded.corpus.vocab.itos
        open_models = self.open_models()
        if open_models:
            from nslm.generation.open_sampling import OpenNslmStepper, generate_open

            stepper = OpenNslmStepper(self.loaded, self.opened.micro, open_models, prompt)
            drawn = generate_open(stepper, max_tokens, sampler)
            return stepper.prompt_tokens, [g.string or itos[g.token_id] for g in drawn]
        stepper = NslmStepper(self.loaded, self.opened.micro, prompt, "plain")
        drawn = generate_with(stepper, max_tokens, sampler)
        return stepper.prompt_tokens, [itos[g.token_id] for g in drawn]

    def open_models(self) -> dict[str, Any]:
        """The run's open micro-models (RUN/open.json), loaded once; {} without them."""
        if self._open is None:
            from nslm.runs.open_micro import run_open_models

            self._open = run_open_models(self.loaded)
        return self._open

    def evaluate(self, split: str = "test", *, max_tokens: int = 0) -> dict[str, float]:
        """Perplexity of a split of the run's corpus (in the corpus's tokens): the NNLM,
        and with micro-models the NSLM ensemble and the pure NSLM of Eq. 4."""
        from nslm.scores.passes import head_of

        part = head_of(self.loaded.corpus.splits[split], max_tokens)
        scorer = self.loaded.scorer()
        if not self.has_micro:
            return {"nnlm": scorer.score(part, ("nnlm",)).perplexity("nnlm")}
        got = scorer.nslm(part, self.opened.micro)
        return {
            "nnlm": got.perplexity("nnlm"),
            "nslm": perplexity(got.ensemble(self.opened.lam)),
            "nslm_pure": got.perplexity("pure"),
        }


class NumeralRun(_TrainedRun):
    """A numeral model of Spithourakis & Riedel (2018) (docs/numerals.md, paper Table 4): a
    word LM whose numerals come from its ``numeral`` head."""

    kind = "numeral"

    def evaluate(self, split: str = "test") -> dict[str, Any]:
        """The numeral figures of Table 4 on a split of the run's corpus: numeral perplexity
        (proper and Ueberla's adjusted), and the value metrics of each position's mode."""
        from nslm.numerals.scoring import score_numerals

        return score_numerals(self.loaded, split).summary()


class ByteRun(_TrainedRun, _Generates[str]):
    """A byte LM (docs/byte-lm.md): 256 symbols, its text any bytes."""

    kind = "byte"
    default_max_tokens = 200

    def score(self, text: str) -> TextScore:
        """``text``'s UTF-8 bytes scored one by one (lines end with a newline byte)."""
        from nslm.byte_lm.data import byte_split

        data = text.encode("utf-8")
        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        if not data.strip():
            raise NslmError("no text to score")
        split = byte_split("text", lines)
        log_probs = self.loaded.scorer().score(split, ("nnlm",)).nnlm
        symbols = tuple(chr(b) if 32 <= b < 127 else f"\\x{b:02x}" for b in split.token_ids)
        return TextScore(symbols, log_probs, len(data), len(text.split()))

    def predict(self, prompt: str, k: int = 10) -> list[Prediction]:
        """The ``k`` likeliest next bytes after ``prompt`` (as characters where printable)."""
        from nslm.scores.passes import next_token_log_probs

        history = [10, *prompt.encode("utf-8")]  # a line starts after a newline byte
        dist = next_token_log_probs(self.loaded.model, history)["nnlm"]
        names = [chr(b) if 32 <= b < 127 else f"\\x{b:02x}" for b in range(256)]
        return _top(dist, names, k)

    def _generate(self, prompt: str, max_tokens: int, sampler: Sampler) -> str:
        """``prompt`` and ``max_tokens`` sampled bytes, decoded as UTF-8 (bad bytes as �)."""
        from nslm.byte_lm.generation import generate_bytes

        prime = prompt.encode("utf-8")
        out = generate_bytes(self.loaded, prime, max_tokens, sampler)
        return (prime + out).decode("utf-8", errors="replace")

    def evaluate(self, split: str = "test", *, max_tokens: int = 0) -> dict[str, float]:
        """Bits per byte and next-byte accuracy on a split of the run's corpus."""
        from nslm.scores.passes import head_of

        part = head_of(self.loaded.corpus.splits[split], max_tokens)
        got = self.loaded.scorer().score(part, ("nnlm",))
        return got.head_figures(("nnlm",))


class WordPosRun(_Generates[list[tuple[str, str | None]]]):
    """A word+POS LM (docs/word-pos.md): it reads and writes (word, tag) pairs, so it is
    scored on its own tagged corpus and generates tagged text."""

    kind = "word_pos"

    def __init__(self, ref: RunRef) -> None:
        from nslm.word_pos.run import load_word_pos_run

        self.path = ref.path
        self.run = load_word_pos_run(ref.path)

    def _generate(
        self, prompt: str, max_tokens: int, sampler: Sampler
    ) -> list[tuple[str, str | None]]:
        """The prompt's (word, tag) pairs and the sampled ones after them; a sentence ends
        with ``("<eos>", tag)``."""
        from nslm.word_pos.generation import generate_word_pos

        given, generated = generate_word_pos(self.run, prompt, max_tokens, sampler)
        return [*given, *generated]

    def evaluate(self, split: str = "test") -> dict[str, Any]:
        """Every figure of docs/word-pos.md's table on a split of the run's tagged corpus."""
        from nslm.word_pos.evaluation import evaluate_word_pos

        return evaluate_word_pos(self.path, (split,))[split]


class NgramLM(_Generates[str]):
    """An n-gram model (``nslm ngram build``'s directory, or an ARPA file)."""

    kind = "ngram"

    def __init__(self, ref: RunRef) -> None:
        from nslm.ngram.arpa import read_arpa
        from nslm.ngram.model import NgramModel

        self.path = ref.path
        self.model = NgramModel.load(ref.path) if ref.path.is_dir() else read_arpa(ref.path)

    def _tokens(self, text: str) -> list[str]:
        from nslm.data.text import prompt_line, text_form_of

        form = text_form_of({}, self.model.itos)
        lines = [prompt_line(line, form, "plain") for line in text.splitlines() if line.strip()]
        return [t for line in lines for t in (*line.split(), "</s>")]

    def score(self, text: str) -> TextScore:
        """Each line of ``text`` a sentence (``<s>`` … ``</s>``), as the model was counted.
        Words outside its vocabulary score as its unknown word (not proper)."""
        tokens = self._tokens(text)
        if not tokens:
            raise NslmError("no text to score")
        log_probs = self.model.score_ids(self.model.encode(tokens), first_nan=False)
        return TextScore(tuple(tokens), log_probs, len(text.encode("utf-8")), len(text.split()))

    def predict(self, prompt: str, k: int = 10) -> list[Prediction]:
        """The ``k`` likeliest next words after ``prompt`` (its last N − 1 words matter)."""
        tokens = self._tokens(prompt)[:-1]  # the prompt's sentence goes on
        history = [int(i) for i in self.model.encode(tokens)]
        dist = np.log(np.maximum(self.model.distribution(history), 1e-300))
        return _top(dist, self.model.itos, k)

    def _generate(self, prompt: str, max_tokens: int, sampler: Sampler) -> str:
        """``prompt`` and a sampled continuation; ``</s>`` becomes a line break."""
        from nslm.data.text import text_form_of, to_plain
        from nslm.ngram.generation import generate_ngram

        tokens = self._tokens(prompt)[:-1]
        generated = generate_ngram(self.model, tokens, max_tokens, sampler)
        return to_plain([*tokens, *generated], text_form_of({}, self.model.itos))


class TransformerLM(_Generates[str]):
    """A Transformer run (docs/transformer.md): micro-models over a frozen pretrained
    Transformer, mixed with it as one proper distribution (Transformer+MM). Its passes are
    kept in RUN/scores, so a text scored twice is read once."""

    def __init__(self, ref: RunRef, micro: str = "auto") -> None:
        from nslm.transformer.commands import open_transformer_run

        if micro not in TRANSFORMER_MICRO:
            raise NslmError(f"micro={micro!r}: a Transformer run takes one of {TRANSFORMER_MICRO}")
        self.run = open_transformer_run(ref.path)
        # what scores, predicts and generates: the Transformer alone ("none"), with the
        # micro-models ("plain"), and with the run's functions too ("functions", "auto")
        self.micro = micro != "none"
        self.functions = micro in ("auto", "functions") and self.run.functions is not None

    @property
    def path(self) -> Path:
        return self.run.run_dir

    def score(
        self,
        text: str,
        *,
        micro: bool | None = None,
        functions: bool | None = None,
        keep: bool = True,
    ) -> TextScore:
        """The text's Transformer tokens and the log-probability of each under the mixture
        with the micro-models and the run's functions (``functions=False``: the micro-models
        alone; ``micro=False``: the Transformer alone; None: as the run was loaded); every
        token is scored. ``keep``: the Transformer's pass is kept in RUN/scores."""
        from nslm.transformer.commands import mixture_parts

        parts = mixture_parts(self.run, text, keep=keep)
        return self.score_parts(parts, micro=micro, functions=functions)

    def score_parts(
        self, parts: Any, *, micro: bool | None = None, functions: bool | None = None
    ) -> TextScore:
        """:meth:`score` of a text already through the Transformer
        (:func:`nslm.transformer.commands.mixture_parts`)."""
        micro = self.micro if micro is None else micro
        functions = self.functions if functions is None else functions
        if not micro:
            scored = parts.score(None)
        else:
            scored = parts.score(self.run.lams, self.run.function_weights if functions else None)
        text_pass = parts.text_pass
        tokens = tuple(text_pass.plain[a:b] for a, b in text_pass.offsets.tolist())
        return TextScore(
            tokens,
            scored.log_probs,
            len(text_pass.plain.encode("utf-8", errors="surrogatepass")),
            len(text_pass.plain.split()),
        )

    def predict(self, prompt: str, k: int = 10) -> list[Prediction]:
        """The k likeliest next words of the mixture (with the run's functions where it has
        them); ``readings``: each class's share λ_c · P(c | h) · P_MM(w | c, ctx), and the
        functions' W · P_fun(w)."""
        from nslm.transformer.commands import predict

        got = predict(self.run, prompt, k=k)
        if not self.micro:
            return [Prediction(w["word"], w["p"], ()) for w in got["Transformer"]]
        words = got.get("Transformer+functions") if self.functions else None
        words = words or got["Transformer+MM"]
        return [
            Prediction(
                w["word"], w["p"], tuple({"class": c, "p": p} for c, p in w["classes"].items())
            )
            for w in words
        ]

    def evaluate(self, text: str) -> dict[str, Any]:
        """Bits per byte overall, on Numbers, Locations and each class, and word perplexity
        of a plain text, for the Transformer alone and with the micro-models."""
        from nslm.transformer.commands import eval_text

        return eval_text(self.run, text)

    def _generate(self, prompt: str, max_tokens: int, sampler: Sampler) -> str:
        """``prompt`` and a continuation of ``max_tokens`` Transformer tokens drawn from the
        mixture (:mod:`nslm.transformer.generate`), as plain text."""
        from nslm.transformer.generate import generate

        sample = generate(
            self.run, prompt, max_tokens, sampler, micro=self.micro, functions=self.functions
        )
        return prompt + sample.text


Model = NslmRun | NumeralRun | ByteRun | WordPosRun | NgramLM | TransformerLM


def load(path: Path | str, *, micro: str = "auto", threads: bool | int = True) -> Model:
    """The model at ``path``, as the object for its kind (:mod:`nslm.runs.kinds`).

    ``micro`` (a word LM): ``auto`` (the context-aware micro-models when fitted, else the
    plain ones, else none), ``plain``, ``context`` or ``none`` (the NNLM head alone); a
    Transformer run: ``auto`` or ``functions`` (micro-models and the run's functions),
    ``plain`` (micro-models alone), ``none`` (the Transformer alone).
    ``threads``: torch's threads; ``True``, what the run trained with."""
    ref = locate_run(path, ngram=True)
    if ref.kind == "transformer":
        return TransformerLM(ref, micro)
    if ref.kind == "ngram":
        return NgramLM(ref)
    if ref.kind == "word_pos":
        return WordPosRun(ref)
    if ref.kind == "byte":
        return ByteRun(open_run(ref.path, micro="none", threads=threads))
    if ref.kind == "numeral":
        return NumeralRun(open_run(ref.path, micro="none", threads=threads))
    return NslmRun(open_run(ref.path, micro=micro, threads=threads))
