"""What the web explorer (``nslm serve``) does with one run: the library calls behind its API.

A :class:`RunView` loads a run once at start-up and answers:

- ``predict``: the top-k next tokens under the NNLM and the NSLM, with the class ×
  micro-model breakdown (:func:`nslm.generation.predict.predict`), per class its likeliest
  members with their values and coordinates (the page draws years as a chart, places on a
  map); a run without micro-models answers with the NNLM alone; a Transformer run
  (docs/transformer.md) with the Transformer's next words and the mixture's, each of the
  mixture's with its share per class (:func:`nslm.transformer.commands.predict`);
- ``generate``: a continuation (NSLM with micro-models when the run has them, class tokens
  marked; else the neural LM; a word+POS run gives word/TAG pairs; a Transformer run, the
  mixture's tokens as plain text), as plain text (or the model's tokens) with each generated
  token's piece of that text;
- ``sample_bytes`` (byte LM): a continuation of a prime, each character with a chosen
  neuron's tanh(cell state), from the model with units ablated, clamped or steered if asked
  (:func:`nslm.byte_lm.steering.intervention_from_fields`);
- ``sentiment`` (byte LM with ``nslm probe sentiment``): P(positive) of the probe saved on
  SST-2 and the verdict of its single best neuron.

A prompt is plain text by default (``input_format="tokenized"``: already in the corpus's
tokens), read by :mod:`nslm.data.text` as ``nslm predict`` reads it; each answer of a word
LM carries the tokens it was read as (a Transformer run reads plain text only). Calls on one
run are serialised (one model, two cores); concurrent predictions are computed together in
one pass (:class:`~nslm.pages.coalesce.Coalescer`), and identical ones come from a small
cache, since a prediction is a pure function of the prompt and its format.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nslm.data.text import OUTPUT_FORMATS, check_input_format
from nslm.errors import NslmError
from nslm.generation.sampling import Sampler, SamplingConfig
from nslm.pages.coalesce import Coalescer
from nslm.pages.pieces import plain_pieces
from nslm.runs.open_micro import run_open_models


@dataclass(frozen=True)
class Limits:
    """What a request may ask for; beyond it the server answers 4xx."""

    max_prompt_chars: int = 2000
    max_tokens: int = 200
    max_k: int = 50
    max_within: int = 500


class RunView:
    """One run, loaded once; every method is safe to call from the server's threads."""

    def __init__(self, name: str, path: Path | str, limits: Limits | None = None) -> None:
        from nslm.runs.kinds import locate_run

        self.name, self.path, self.limits = name, Path(path), limits or Limits()
        ref = locate_run(self.path)
        if ref.kind == "transformer":  # micro-models over a frozen pretrained Transformer
            import torch

            from nslm.transformer.commands import open_transformer_run

            threads = torch.get_num_threads()  # the run's "threads" must not undo the server's
            self.kind, self.loaded, self.micro = "transformer", open_transformer_run(self.path), {}
            torch.set_num_threads(threads)
            self.open_models = {}
            self.form = "plain"
        elif ref.kind == "word_pos":
            from nslm.word_pos.run import load_word_pos_run

            self.kind, self.loaded, self.micro = "word-pos", load_word_pos_run(self.path), {}
            self.open_models: dict[str, Any] = {}
            self.form = "whitespace"  # its words are read and written as they are
        else:
            from nslm.runs.open import open_run

            byte = ref.kind == "byte"
            # threads=False: the server set torch's threads (one per request) before loading
            opened = open_run(self.path, micro="none" if byte else "auto", threads=False)
            self.loaded, self.micro, self.lam = opened.loaded, opened.micro, opened.lam
            self.kind = "byte" if byte else "nslm" if opened.has_micro else "word"
            self.form = "whitespace" if byte else opened.text_form
            self.open_models = run_open_models(self.loaded) if opened.has_micro else {}
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple, dict] = OrderedDict()
        self._predictions = Coalescer(self._predict_many)
        self._sentiment = self._load_sentiment() if self.kind == "byte" else None

    def describe(self) -> dict[str, Any]:
        can = {
            "predict": self.kind in ("nslm", "word", "transformer"),
            "generate": True,
            "neurons": self.kind == "byte",
            "sentiment": self._sentiment is not None,
        }
        hidden = getattr(getattr(self.loaded, "model", None), "backbone", None)
        return {
            "name": self.name,
            "kind": self.kind,
            "can": can,
            "neurons": getattr(hidden, "out_dim", None),
        }

    # -- next token ----------------------------------------------------------------------------

    def predict(
        self, prompt: str, k: int = 10, within: int = 50, input_format: str = "plain"
    ) -> dict[str, Any]:
        if self.kind not in ("nslm", "word", "transformer"):
            raise NslmError(f"run {self.name!r} is a {self.kind} run: no next-token breakdown")
        if self.kind == "transformer" and input_format != "plain":
            raise NslmError("a Transformer run reads plain text: input_format must be 'plain'")
        key = (prompt, k, within, check_input_format(input_format))
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        return self._predictions(key)

    def _predict_many(self, keys: Sequence[tuple[str, int, int, str]]) -> list[dict | Exception]:
        """The predictions of concurrent requests (see :class:`Coalescer`): those asking the
        same k, within and input format in one pass; a prompt that fails fails alone."""
        out: dict[int, dict | Exception] = {}
        groups: dict[tuple[int, int, str], list[int]] = {}
        for i, (_, *asked) in enumerate(keys):
            groups.setdefault(tuple(asked), []).append(i)
        with self._lock:
            for asked, rows in groups.items():
                try:
                    got = self._predict([keys[i][0] for i in rows], *asked)
                except Exception:  # a bad prompt in the group: each alone, so it fails alone
                    got = [self._predict_alone(keys[i][0], *asked) for i in rows]
                out.update(zip(rows, got, strict=True))
            for i, result in out.items():
                if not isinstance(result, Exception):
                    self._cache[keys[i]] = result
            while len(self._cache) > 256:
                self._cache.popitem(last=False)
        return [out[i] for i in range(len(keys))]

    def _predict_alone(
        self, prompt: str, k: int, within: int, input_format: str
    ) -> dict | Exception:
        try:
            return self._predict([prompt], k, within, input_format)[0]
        except Exception as exc:  # answered to its own request
            return exc

    def _predict(
        self, prompts: list[str], k: int, within: int, input_format: str
    ) -> list[dict[str, Any]]:
        if self.kind == "transformer":  # the Transformer's words and the mixture's
            from nslm.transformer.commands import predict

            return [predict(self.loaded, prompt, k=k) for prompt in prompts]
        from nslm.generation.predict import predict_many

        # a run without micro-models answers with the NNLM's list alone (micro is {})
        got = predict_many(
            self.loaded,
            self.micro,
            prompts,
            k=k,
            lam=self.lam,
            n_within=within,
            input_format=input_format,
        )
        if self.open_models:  # NSLM-open's list beside: new years, counts, places (marked)
            from nslm.generation.open_predict import open_predict_many

            opened = open_predict_many(
                self.loaded,
                self.micro,
                self.open_models,
                prompts,
                k=k,
                lam=self.lam,
                input_format=input_format,
            )
            for result, extra in zip(got, opened, strict=True):
                result["open"] = extra
        return got

    # -- generation ----------------------------------------------------------------------------

    def generate(
        self,
        prompt: str,
        max_tokens: int,
        sampling: SamplingConfig,
        seed: int | None,
        input_format: str = "plain",
        output_format: str = "plain",
    ) -> dict[str, Any]:
        """A continuation of ``prompt``: ``read_as``, the prompt's tokens; ``text``, the prompt
        and the continuation as plain text (``output_format="tokenized"``: the tokens joined
        by spaces); per generated token its ``display``, its piece of ``text`` (with the space
        before it), after ``prompt_text``, the prompt's piece."""
        check_input_format(input_format)
        if output_format not in OUTPUT_FORMATS:
            raise NslmError(
                f"unknown output format {output_format!r}; one of {', '.join(OUTPUT_FORMATS)}"
            )
        sampler = Sampler(sampling, seed=seed)
        if self.kind == "transformer" and "tokenized" in (input_format, output_format):
            raise NslmError(
                "a Transformer run reads and writes plain text: formats must be 'plain'"
            )
        with self._lock:
            if self.kind == "transformer":  # the mixture's tokens (nslm.transformer.generate)
                from nslm.transformer.generate import generate as sample_mixture

                text = sample_mixture(self.loaded, prompt, max_tokens, sampler).text
                return _one_piece(prompt, text, output_format)
            if self.kind == "byte":
                from nslm.byte_lm.generation import generate_bytes

                data = generate_bytes(self.loaded, prompt.encode("utf-8"), max_tokens, sampler)
                text = data.decode("utf-8", errors="replace")
                return _one_piece(prompt, text, output_format)
            if self.kind == "word-pos":
                from nslm.word_pos.generation import generate_word_pos

                given, pairs = generate_word_pos(self.loaded, prompt, max_tokens, sampler)
                read_as = [w for w, _ in given]
                drawn = [{"token": w, "class": t} for w, t in pairs]
            else:
                read_as, drawn = self._generate_words(prompt, max_tokens, sampler, input_format)
        form = "whitespace" if output_format == "tokenized" else self.form
        prompt_text, pieces = plain_pieces(read_as, [d["token"] for d in drawn], form)
        for entry, piece in zip(drawn, pieces, strict=True):
            entry["display"] = piece
        return {
            "prompt": prompt,
            "read_as": read_as,
            "prompt_text": prompt_text,
            "text": prompt_text + "".join(pieces),
            "output_format": output_format,
            "tokens": drawn,
        }

    def _generate_words(
        self, prompt: str, max_tokens: int, sampler: Sampler, input_format: str
    ) -> tuple[list[str], list[dict]]:
        """The prompt's tokens as read (as ``nslm predict`` reads them: tokenized, numbers
        re-joined, places chunked) and the generated tokens with their readings."""
        from nslm.data.vocab import EOS
        from nslm.generation.neural import generate_neural
        from nslm.generation.nslm_sampling import NslmStepper, generate_with
        from nslm.generation.prompts import prompt_split

        vocab, names = self.loaded.corpus.vocab, self.loaded.corpus.class_names
        if self.kind == "nslm" and self.open_models:  # new members can be drawn (marked)
            from nslm.generation.open_sampling import OpenNslmStepper, generate_open

            stepper = OpenNslmStepper(
                self.loaded, self.micro, self.open_models, prompt, input_format
            )
            drawn_open = generate_open(stepper, max_tokens, sampler)
            return list(stepper.prompt_tokens), [
                {
                    "token": g.string or vocab.itos[g.token_id],
                    "class": names[g.cls] if g.cls else None,
                    **({"new": True} if g.new else {}),
                }
                for g in drawn_open
            ]
        if self.kind == "nslm":
            stepper = NslmStepper(self.loaded, self.micro, prompt, input_format)
            drawn = generate_with(stepper, max_tokens, sampler)
            return list(stepper.prompt_tokens), [
                {"token": vocab.itos[g.token_id], "class": names[g.cls] if g.cls else None}
                for g in drawn
            ]
        read_as, ids = [], []
        if prompt.strip():  # else: the start of a line
            split, read_as = prompt_split(self.loaded, prompt, input_format=input_format)
            ids = split.token_ids[:-1].tolist()
        eos = vocab.stoi[EOS]
        head = self.loaded.cfg.heads[0]
        drawn_ids = generate_neural(
            self.loaded.model, [eos, *ids], max_tokens, sampler, head=head, eos_id=eos
        )
        return read_as, [{"token": vocab.itos[i], "class": None} for i in drawn_ids]

    # -- byte LM ---------------------------------------------------------------------------------

    def sample_bytes(
        self,
        prime: str,
        max_bytes: int,
        sampling: SamplingConfig,
        seed: int | None,
        neuron: int,
        fields: dict | None = None,
    ) -> dict[str, Any]:
        from nslm.byte_lm.colour import characters, neuron_values
        from nslm.byte_lm.generation import generate_bytes, text_cells
        from nslm.byte_lm.intervention import intervening
        from nslm.byte_lm.steering import intervention_from_fields

        if self.kind != "byte":
            raise NslmError(f"run {self.name!r} is not a byte LM: no neurons to colour by")
        hidden = self.loaded.model.backbone.out_dim
        if not 0 <= neuron < hidden:
            raise NslmError(
                f"neuron {neuron} is out of range: the LM has {hidden} (0 to {hidden - 1})"
            )
        probe = self._sentiment["file"] if self._sentiment else None
        iv = intervention_from_fields(self.loaded, fields or {}, probe)
        with self._lock, intervening(self.loaded.model, iv):
            data = prime.encode("utf-8")
            generated = generate_bytes(self.loaded, data, max_bytes, Sampler(sampling, seed=seed))
            values = neuron_values(text_cells(self.loaded, data, generated), neuron)
        text = data + generated
        chars = [{"char": c, "value": float(values[end])} for c, end in characters(text)]
        return {"prime": prime, "neuron": neuron, "chars": chars, "n_prime_bytes": len(data)}

    def _load_sentiment(self) -> dict | None:
        """The SST-2 probe of ``nslm probe sentiment`` (its best pooling) and its neuron."""
        import json

        from nslm.byte_lm.probes.estimators import load_probe

        folder = self.path / "probes" / "sentiment-sst2"
        if not (folder / "summary.json").is_file():
            return None
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        pooling = summary["best_pooling"]
        return {
            "pooling": pooling,
            "framed": summary.get("framed", False),
            "probe": load_probe(folder / f"probe_{pooling}.json"),
            "file": folder / f"probe_{pooling}.json",
            "neuron": load_probe(folder / "neuron.json"),
            "test_acc": summary.get("all_acc"),
            "neuron_test_acc": summary.get("one_neuron_acc"),
        }

    def sentiment(self, text: str) -> dict[str, Any]:
        from nslm.byte_lm.labelled import detokenise_ptb
        from nslm.byte_lm.probes.sentiment import framed
        from nslm.byte_lm.probes.states import final_states

        if self._sentiment is None:
            raise NslmError(
                f"run {self.name!r} has no sentiment probe: run 'nslm probe "
                f"sentiment {self.path}' first"
            )
        s = self._sentiment
        texts = [detokenise_ptb(text) if s["framed"] else text]
        with self._lock:
            states = final_states(self.loaded, framed(texts, frame=s["framed"]))
        X = states[s["pooling"]]
        p_positive = float(s["probe"].predict_proba(X)[0, 1])
        neuron = s["neuron"]
        return {
            "p_positive": p_positive,
            "label": "positive" if p_positive >= 0.5 else "negative",
            "probe_test_acc": s["test_acc"],
            "neuron": int(neuron.neuron),
            "neuron_value": float(X[0, neuron.neuron]),
            "neuron_label": "positive" if neuron.predict(X)[0] == 1 else "negative",
            "neuron_test_acc": s["neuron_test_acc"],
        }


def _one_piece(prompt: str, text: str, output_format: str) -> dict[str, Any]:
    """``generate``'s answer for a continuation drawn as plain text (a byte LM's bytes, a
    Transformer run's tokens): the prompt as given and the continuation as one piece."""
    return {
        "prompt": prompt,
        "read_as": [],
        "prompt_text": prompt,
        "text": prompt + text,
        "output_format": output_format,
        "tokens": [{"token": text, "class": None, "display": text}],
    }
