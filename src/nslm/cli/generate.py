"""``nslm generate RUN --prompt …``: sample a continuation from any nslm LM."""

from __future__ import annotations

from pathlib import Path

import click

from nslm.errors import NslmError
from nslm.generation.ngram import generate_ngram
from nslm.generation.sampling import Sampler, SamplingConfig

NSLM = "nslm"


@click.command("generate")
@click.argument("run", type=click.Path(path_type=Path))
@click.option("--prompt", default="", help="Text to continue (whitespace-tokenised).")
@click.option("--max-tokens", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--temperature", type=float, default=1.0, show_default=True, help="0 = greedy.")
@click.option("--top-k", type=click.IntRange(min=0), default=0, show_default=True, help="0 = all.")
@click.option("--top-p", type=float, default=1.0, show_default=True)
@click.option("--seed", type=int, default=None, help="Fix the random draws.")
@click.option(
    "--head",
    default=None,
    help="Training runs: nnlm, hnlm or nslm (Eq. 4 with RUN/micro.json) "
    "[nslm if RUN/micro.json exists, else the first head].",
)
@click.option(
    "--show-classes", is_flag=True, help="NSLM: print each generated class token as token/<class>."
)
def generate_command(
    run: Path,
    prompt: str,
    max_tokens: int,
    temperature: float,
    top_k: int,
    top_p: float,
    seed: int | None,
    head: str | None,
    show_classes: bool,
) -> None:
    """Continue PROMPT with the LM in RUN: a training run directory (`nslm train`), an
    n-gram model directory (`nslm ngram build`) or an ARPA file.

    With RUN/micro.json (`nslm fit-micro RUN`) a training run generates through the NSLM:
    class tokens (years, places, …) come from the micro-models, so a generated year follows
    the previous one. A sentence end (</s>, <eos>) is printed as a line break.
    """
    config = SamplingConfig(temperature=temperature, top_k=top_k or None, top_p=top_p)
    sampler = Sampler(config, seed=seed)
    tokens = ["</s>" if t == "<eos>" else t for t in prompt.split()]
    if _is_ngram(run):
        if head == NSLM or show_classes:
            raise NslmError("an n-gram model has no micro-models: --head nslm needs a training run")
        from nslm.cli.ngram import load_model

        generated = generate_ngram(load_model(run), tokens, max_tokens, sampler)
    elif (run / "config.json").is_file():
        if head is None and (run / "micro.json").is_file():
            head = NSLM
        if show_classes and head != NSLM:
            raise NslmError("--show-classes needs the NSLM (--head nslm and RUN/micro.json)")
        if head == NSLM:
            generated = _generate_nslm(run, prompt, max_tokens, sampler, show_classes)
        else:
            generated = _generate_neural(run, tokens, max_tokens, sampler, head)
    else:
        raise NslmError(f"no run or model at {run}")
    lines: list[list[str]] = [[]]
    for token in [*tokens, *generated]:
        if token == "</s>":
            lines.append([])
        else:
            lines[-1].append(token)
    click.echo("\n".join(" ".join(line) for line in lines))


def _generate_neural(
    run: Path, tokens: list[str], max_tokens: int, sampler: Sampler, head: str | None
) -> list[str]:
    from nslm.data.vocab import EOS
    from nslm.generation.neural import generate_neural
    from nslm.runs.load import load_run

    loaded = load_run(run)
    vocab = loaded.corpus.vocab
    head = head or loaded.cfg.heads[0]
    if head not in loaded.cfg.heads:
        raise NslmError(f"{run} has no {head!r} head; it has {', '.join(loaded.cfg.heads)}")
    prompt_ids = [int(i) for i in vocab.encode([EOS if t == "</s>" else t for t in tokens])]
    ids = generate_neural(
        loaded.model, prompt_ids, max_tokens, sampler, head=head, eos_id=vocab.stoi[EOS]
    )
    return ["</s>" if vocab.itos[i] == EOS else vocab.itos[i] for i in ids]


def _generate_nslm(
    run: Path, prompt: str, max_tokens: int, sampler: Sampler, show_classes: bool
) -> list[str]:
    """The NSLM (Eq. 4) continuation; the prompt is prepared as `nslm predict` prepares it."""
    from nslm.config import total_threads
    from nslm.data.vocab import EOS
    from nslm.generation.nslm_sampling import generate_nslm
    from nslm.runs.load import load_run
    from nslm.runs.micro import load_run_micro
    from nslm.scores.passes import use_threads

    if not (run / "micro.json").is_file():  # before the (slow) corpus load
        raise NslmError(f"no {run / 'micro.json'}: run 'nslm fit-micro {run}' first")
    loaded = load_run(run)
    use_threads(total_threads(loaded.cfg))
    micro = load_run_micro(loaded)
    itos, names = loaded.corpus.vocab.itos, loaded.corpus.class_names
    out = []
    for g in generate_nslm(loaded, micro, prompt.replace("</s>", EOS), max_tokens, sampler):
        token = "</s>" if itos[g.token_id] == EOS else itos[g.token_id]
        out.append(f"{token}/<{names[g.cls]}>" if show_classes and g.cls else token)
    return out


def _is_ngram(run: Path) -> bool:
    return (run / "model.json").is_file() or (run.is_file() and run.suffix in (".arpa", ".lm"))
