"""``nslm generate RUN [PROMPT]``: sample a continuation from any nslm LM."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nslm.cli.intervention_options import intervention_options, wants_intervention
from nslm.cli.options import (
    file_option,
    input_format_option,
    int_range_option,
    micro_kind_option,
    model_option,
    open_vocab_option,
    output_format_option,
    run_argument,
    use_nslm,
)
from nslm.data.text import prompt_line, text_form_of, to_plain
from nslm.errors import NslmError
from nslm.generation.predict_text import printable
from nslm.generation.sampling import Sampler, SamplingConfig
from nslm.ngram.generation import generate_ngram

if TYPE_CHECKING:
    from nslm.runs.kinds import RunRef
    from nslm.runs.open import OpenRun

NSLM = "nslm"


@click.command("generate")
@run_argument(ngram=True)
@click.argument("prompt", required=False, default=None)
@int_range_option("--max-tokens", default=50, help="How many tokens to generate.")
@click.option("--temperature", type=float, default=1.0, show_default=True, help="0 = greedy.")
@int_range_option(
    "--top-k",
    low=0,
    default=0,
    help="Sample among the k likeliest tokens only (0 = all).",
)
@click.option(
    "--top-p",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    default=1.0,
    show_default=True,
    help="Nucleus sampling: among the likeliest tokens whose probabilities add up to p (1 = all).",
)
@click.option("--seed", type=int, default=None, help="Fix the random draws.")
@model_option("generate")
@click.option(
    "--head",
    default=None,
    help="Training runs, neural model: the head to sample from, nnlm or hnlm [the first "
    "head] (the NSLM is --model nslm).",
)
@click.option(
    "--show-classes", is_flag=True, help="NSLM: print each generated class token as token/<class>."
)
@int_range_option(
    "--neuron",
    low=0,
    help="Byte LM: colour each byte by this neuron's tanh(cell state) (+1 red, "
    "−1 blue) in the terminal.",
)
@file_option(
    "--html",
    "html_out",
    help="Byte LM, with --neuron: also write the coloured text as an HTML page.",
)
@intervention_options
@micro_kind_option
@open_vocab_option("NSLM: draw from")
@input_format_option
@output_format_option
def generate_command(
    run: RunRef,
    prompt: str | None,
    max_tokens: int,
    temperature: float,
    top_k: int,
    top_p: float,
    seed: int | None,
    head: str | None,
    show_classes: bool,
    neuron: int | None = None,
    html_out: Path | None = None,
    model_kind: str = "auto",
    micro_kind: str = "auto",
    input_format: str = "plain",
    output_format: str = "plain",
    open_vocab: bool | None = None,
    **intervene: Any,
) -> None:
    """Continue PROMPT (plain text; none: start a fresh line) with the LM in RUN: a training
    run directory (`nslm train`), an n-gram model directory (`nslm ngram build`) or an ARPA
    file.

    Through the NSLM (RUN/micro.json, from 'nslm micro fit RUN'), class tokens (years,
    places, …) come from the micro-models, so a generated year follows the previous one;
    with RUN/open.json, from NSLM-open, which can also name a year, a count or a place the
    vocabulary never held (marked * with --show-classes).
    The prompt and its continuation are printed as plain text (--output-format tokenized:
    as the model's tokens); a sentence end (</s>, <eos>) is a line break.

    A Transformer run (docs/transformer.md) samples from the Transformer with micro-models
    (--model neural: the Transformer alone), --max-tokens counting its tokens.

    A byte LM (docs/byte-lm.md) continues PROMPT byte by byte (--max-tokens counts bytes);
    --neuron colours the text by one neuron's cell state, --html writes it as a page too;
    --ablate, --clamp and --steer change its units at every step (docs/probes.md).
    """
    prompt = prompt or ""
    config = SamplingConfig(temperature=temperature, top_k=top_k or None, top_p=top_p)
    sampler = Sampler(config, seed=seed)
    if run.kind == "byte":
        _generate_bytes(run, prompt, max_tokens, sampler, neuron, html_out, intervene)
        return
    if run.kind == "transformer":
        drop = {
            "--head": head,
            "--show-classes": show_classes,
            "--neuron": neuron is not None,
            "--html": html_out is not None,
            "--ablate/--clamp/--steer": wants_intervention(intervene),
            "--micro": micro_kind != "auto",
            "--open-vocab/--closed-vocab": open_vocab is not None,
            "--input-format tokenized": input_format != "plain",
            "--output-format tokenized": output_format != "plain",
        }
        if any(drop.values()):
            given = ", ".join(k for k, v in drop.items() if v)
            raise NslmError(f"a Transformer run samples plain text: no {given}")
        _generate_transformer(run, prompt, max_tokens, sampler, model_kind)
        return
    if wants_intervention(intervene):
        raise NslmError("--ablate, --clamp and --steer need a byte-LM run (docs/probes.md)")
    if run.kind == "word_pos":
        if neuron is not None or html_out is not None or head or show_classes:
            raise NslmError(
                "a word+POS run samples (word, tag) pairs: no --neuron, --html, "
                "--head or --show-classes"
            )
        _generate_word_pos(run, prompt, max_tokens, sampler)
        return
    if neuron is not None or html_out is not None:
        raise NslmError("--neuron and --html need a byte-LM run (see docs/byte-lm.md)")
    if run.kind == "ngram":
        if head == NSLM or show_classes or model_kind == NSLM:
            raise NslmError("an n-gram model has no micro-models: the NSLM needs a training run")
        from nslm.cli.ngram import load_model

        model = load_model(run)
        form = text_form_of({}, model.itos)
        tokens = _prompt_tokens(prompt, form, input_format)
        generated = generate_ngram(model, tokens, max_tokens, sampler)
    else:
        model_kind = _model_of(run, model_kind, head, show_classes)
        form, tokens, generated = _generate_from_run(
            run,
            prompt,
            max_tokens,
            sampler,
            model_kind,
            micro_kind,
            open_vocab,
            head,
            show_classes,
            input_format,
        )
    words = [*tokens, *generated]
    # token/<class> marks read as tokens
    plain_form = "whitespace" if output_format == "tokenized" or show_classes else form
    click.echo(printable(to_plain(words, plain_form)))  # the prompt's control characters too


def _generate_from_run(
    run: RunRef,
    prompt: str,
    max_tokens: int,
    sampler: Sampler,
    model_kind: str,
    micro_kind: str,
    open_vocab: bool | None,
    head: str | None,
    show_classes: bool,
    input_format: str,
) -> tuple[str, list[str], list[str]]:
    """A training run's text form, the prompt's tokens and the generated ones: from
    NSLM-open, the NSLM or a neural head, as --model, --open-vocab and --head say."""
    from nslm.runs.open import open_run
    from nslm.runs.open_micro import OPEN_FILE

    nslm = use_nslm(run, model_kind, "generate")
    if open_vocab and not nslm:
        raise NslmError("--open-vocab draws from NSLM-open: it needs the NSLM (RUN/micro.json)")
    opened = open_run(run, micro=micro_kind if nslm else "none")
    form = opened.text_form
    if not nslm:
        tokens = _prompt_tokens(prompt, form, input_format)
        return form, tokens, _generate_neural(opened, tokens, max_tokens, sampler, head)
    if open_vocab is None:
        open_vocab = (run / OPEN_FILE).is_file()
    generated = _generate_nslm(
        opened, prompt, max_tokens, sampler, show_classes, input_format, open_vocab
    )
    return form, *generated


def _generate_transformer(
    run: RunRef, prompt: str, max_tokens: int, sampler: Sampler, model_kind: str
) -> None:
    """The prompt and its continuation, Transformer token by token, from the mixture with the
    micro-models (``--model neural``: the Transformer alone; docs/transformer.md)."""
    from nslm.transformer.commands import open_transformer_run
    from nslm.transformer.generate import generate

    sample = generate(
        open_transformer_run(run.path), prompt, max_tokens, sampler, micro=model_kind != "neural"
    )
    click.echo(printable(prompt + sample.text))


def _prompt_tokens(prompt: str, form: str, input_format: str) -> list[str]:
    """The prompt's tokens as a neural or n-gram LM reads them (a line break: </s>)."""
    line = prompt_line(prompt, form, input_format) if prompt.strip() else ""
    return ["</s>" if t == "<eos>" else t for t in line.split()]


def _model_of(run: RunRef, model_kind: str, head: str | None, show_classes: bool) -> str:
    """--model with --head folded in: a head is a neural one."""
    if head == NSLM:
        raise NslmError("--head names a neural head (nnlm, hnlm); the NSLM is --model nslm")
    if head is not None:
        if model_kind == NSLM:
            raise NslmError(f"--head {head} is a neural head; drop it for --model nslm")
        model_kind = "neural"
    if show_classes and (model_kind == "neural" or not (run / "micro.json").is_file()):
        raise NslmError("--show-classes needs the NSLM (RUN/micro.json and no neural --head)")
    return model_kind


def _generate_neural(
    opened: OpenRun, tokens: list[str], max_tokens: int, sampler: Sampler, head: str | None
) -> list[str]:
    from nslm.data.vocab import EOS
    from nslm.generation.neural import generate_neural

    loaded = opened.loaded
    vocab = loaded.corpus.vocab
    head = head or loaded.cfg.heads[0]
    if head not in loaded.cfg.heads:
        raise NslmError(
            f"{opened.run_dir} has no {head!r} head; it has {', '.join(loaded.cfg.heads)}"
        )
    prompt_ids = [int(i) for i in vocab.encode([EOS if t == "</s>" else t for t in tokens])]
    ids = generate_neural(
        loaded.model, prompt_ids, max_tokens, sampler, head=head, eos_id=vocab.stoi[EOS]
    )
    return ["</s>" if vocab.itos[i] == EOS else vocab.itos[i] for i in ids]


def _generate_nslm(
    opened: OpenRun,
    prompt: str,
    max_tokens: int,
    sampler: Sampler,
    show_classes: bool,
    input_format: str,
    open_vocab: bool = False,
) -> tuple[list[str], list[str]]:
    """The prompt's tokens (read as `nslm predict` reads them) and the NSLM (Eq. 4)
    continuation; with ``open_vocab``, NSLM-open's (nslm.generation.open_sampling), where a
    class token may be a member the vocabulary never held (marked * with --show-classes)."""
    from nslm.data.vocab import EOS
    from nslm.generation.nslm_sampling import NslmStepper, generate_with
    from nslm.generation.open_sampling import OpenNslmStepper, generate_open

    loaded, text = opened.loaded, prompt.replace("</s>", EOS)
    if open_vocab:
        from nslm.runs.open_micro import run_open_models

        open_models = run_open_models(loaded, required=True)
        stepper = OpenNslmStepper(loaded, opened.micro, open_models, text, input_format)
        drawn = generate_open(stepper, max_tokens, sampler)
    else:
        stepper = NslmStepper(loaded, opened.micro, text, input_format)
        drawn = generate_with(stepper, max_tokens, sampler)
    itos, names = loaded.corpus.vocab.itos, loaded.corpus.class_names
    out = []
    for g in drawn:
        new = getattr(g, "string", None)  # NSLM-open's new member, as written
        token = new or ("</s>" if itos[g.token_id] == EOS else itos[g.token_id])
        if show_classes and g.cls:
            token = f"{token}/<{names[g.cls]}>{'*' if new else ''}"
        out.append(token)
    return ["</s>" if t == EOS else t for t in stepper.prompt_tokens], out


def _generate_bytes(
    run: Path,
    prompt: str,
    max_bytes: int,
    sampler: Sampler,
    neuron: int | None,
    html_out: Path | None,
    intervene: dict[str, Any],
) -> None:
    """Print PROMPT and its byte-by-byte continuation, coloured by --neuron if given, from
    the model with the units --ablate, --clamp and --steer name changed at every step."""
    import sys

    from nslm.byte_lm.colour import ansi, html_page, neuron_values
    from nslm.byte_lm.generation import generate_bytes, text_cells
    from nslm.byte_lm.intervention import intervening
    from nslm.cli.intervention_options import intervention_of
    from nslm.files.atomic import write_bytes_atomic
    from nslm.runs.load import load_run

    if html_out is not None and neuron is None:
        raise NslmError("--html colours the text by a neuron: give --neuron too")
    loaded = load_run(run)
    prime = prompt.encode("utf-8")
    with intervening(loaded.model, intervention_of(loaded, intervene)):
        generated = generate_bytes(loaded, prime, max_bytes, sampler)
        cells = text_cells(loaded, prime, generated) if neuron is not None else None
    text = prime + generated
    if cells is None:
        sys.stdout.flush()
        sys.stdout.buffer.write(text + b"\n")
        sys.stdout.buffer.flush()
        return
    values = neuron_values(cells, neuron)
    click.echo(ansi(text, values), color=True)  # asked for: keep the colours in a pipe too
    if html_out is not None:
        title = f"{run.name}: neuron {neuron}"
        write_bytes_atomic(html_out, html_page(text, values, title=title).encode("utf-8"))
        click.echo(f"wrote {html_out}", err=True)


def _generate_word_pos(run: Path, prompt: str, max_tokens: int, sampler: Sampler) -> None:
    """Print the prompt and the sampled continuation as word/TAG, a sentence a line."""
    from nslm.word_pos.generation import generate_word_pos
    from nslm.word_pos.run import load_word_pos_run

    given, generated = generate_word_pos(load_word_pos_run(run), prompt, max_tokens, sampler)
    lines: list[list[str]] = [[]]
    for word, tag in [*given, *generated]:
        if word == "<eos>":
            lines.append([])
        else:
            lines[-1].append(f"{word}/{tag}" if tag else word)
    click.echo(printable("\n".join(" ".join(line) for line in lines if line)))
