"""The functions over the Transformer (SmolLM2-135M): Transformer, Transformer+MM and
Transformer+functions on WikiText-2 test and EWT, at the positions where a function
applies, in greedy generation after a conversion's parenthesis, on prompts of our own and
on years after unseen years; for benchmarks/functions/functions.py (``--transformer RUN``).

The run's functions (RUN/functions.json: fitted on WikiText-2 train as written, λ_f per
function on the valid prefix) are fitted first where the run has none
(:func:`nslm.transformer.commands.fit_run_functions`). The Transformer's passes over the
texts are those of benchmarks/transformer/transformer_nslm.py (kept in RUN/scores).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transformer"))

from nslm.data.numbers import is_number, is_year_shaped, number_value
from nslm.transformer.commands import fit_run_functions
from nslm.transformer.functions import FUNCTIONS_FILE
from nslm.transformer.sites import documents_of_split

MODELS = ("Transformer", "Transformer+MM", "Transformer+functions")
PROMPTS = (
    "The trail runs 14.5 miles (",
    "The ridge rises to 2,340 feet (",
    "The lake covers 37 square miles (",
    "The tank holds 45 litres (",
    "The bridge's main span is 312 metres (",
    "The storm's winds reached 85 mph (",
    "The statue weighs 12 tonnes (",
    "The tower is 1,150 feet (",
    "The road climbs for 8.6 kilometres (",
    "The summer of 2031 was warm, and the 2031–",
    "The club won the league in the 2033–",
    "She was born in 1931 in Ohio and died in 2004 at the age of",
    "He was born in 2012 and, in 2090, died at the age of",
    "The plant opened in 2027. Twelve years later, in",
    "The tower was finished in 2029 and demolished in",
    "The festival began in 2035 and ran until",
    "The treaty was signed in 2041 and ended in",
    "The colony was founded in 2062 and abandoned in",
    "The bridge opened in 2024, and 3 of its 12 spans ( 25 % ) were rebuilt; 9 of the 12 (",
    "The river is 120 miles (",
    "The war began in 1914, and ended in",
    "Temperatures reach 40 °C (",
)
YEAR_PROMPTS = (
    ("The tower was finished in {y} and demolished in", 2029),
    ("The festival began in {y} and ended in", 2035),
    ("The treaty was signed in {y} and ended in", 2041),
    ("The company was founded in {y} and dissolved in", 2046),
    ("The colony was settled in {y} and abandoned in", 2062),
    ("The mine opened in {y} and closed in", 2071),
    ("The war began in {y} and ended in", 2083),
    ("The dam was started in {y} and completed in", 2038),
    ("The league was formed in {y} and disbanded in", 2057),
    ("The station was built in {y} and closed in", 2094),
    ("The king was crowned in {y} and died in", 2067),
    ("The observatory opened in {y} and was closed in", 2088),
)


def open_run(run_dir: Path, progress: bool = True) -> tuple:
    """The run with its functions (fitted first where it has none) and the fit's evidence."""
    from nslm.transformer.commands import open_transformer_run

    fitted = None
    if not (run_dir / FUNCTIONS_FILE).is_file():
        fitted = fit_run_functions(run_dir, progress)
    return open_transformer_run(run_dir), fitted


def function_positions(text_pass, functions) -> list[tuple[int, str]]:
    """(corpus index, the functions firing there) at every corpus token of the text where a
    function applies (its trigger, right or not) and whose first Transformer token is known."""
    text = text_pass.text
    out = []
    for start, end in documents_of_split(text.strings, text.split.article_ids):
        tokens = list(text.strings[start:end])
        for i in range(1, len(tokens)):
            refs = functions.references(tokens, i)
            if refs and text_pass.ranges[start + i][0] >= 0:
                out.append((start + i, "+".join(sorted(r.function for r in refs))))
    return out


def rows(run, parts) -> dict:
    """Bits per byte overall, on Numbers and Locations, per model."""
    from nslm.transformer.tables import class_figures

    names = run.class_names
    scored = {
        "Transformer": parts.score(None),
        "Transformer+MM": parts.score(run.lams),
        "Transformer+functions": parts.score(run.lams, run.function_weights),
    }
    out = {}
    for model, s in scored.items():
        figures = class_figures(parts.text_pass, s, names)
        out[model] = {k: figures[k] for k in ("bits_per_byte", "bpb_numbers", "bpb_locations")}
    return out, scored


def computed(parts, scored: dict, positions: list[tuple[int, str]]) -> dict:
    """At the positions where a function applies: bits per byte of the word written there,
    the median probability of that word, per model and per function."""
    from nslm.transformer.tables import word_bits

    at = np.array([p for p, _ in positions], dtype=np.int64)
    names = np.array([n for _, n in positions])
    out: dict = {}
    for model, s in scored.items():
        bits, size = word_bits(parts.text_pass, s)
        b, n = bits[at], size[at]
        ok = ~np.isnan(b)
        out[model] = {
            "positions": int(ok.sum()),
            "bits_per_byte": float(b[ok].sum() / n[ok].sum()),
            "p_gold_median": float(np.median(2.0 ** -b[ok])),
            "by_function": {
                name: {
                    "positions": int((ok & (names == name)).sum()),
                    "bits_per_byte": float(
                        b[ok & (names == name)].sum() / max(1, n[ok & (names == name)].sum())
                    ),
                }
                for name in sorted(set(names.tolist()))
            },
        }
    return out


def prompt_text(plain: str, start: int, chars: int = 1200) -> str:
    """The text before character ``start``: at most ``chars`` characters, from a line start
    (or a sentence start where the line is longer)."""
    text = plain[max(0, start - chars) : start]
    if start > chars:
        cut = text.find("\n")
        if cut < 0 or cut > len(text) // 2:
            cut = text.find(". ") + 1
        text = text[cut + 1 :] if cut >= 0 else text
    return text.rstrip(" ")


def greedy_word(run, prompt: str, micro: bool, max_tokens: int = 8) -> str:
    """The next word greedy decoding gives after ``prompt``: tokens, each the likeliest, up to
    the first that starts a new word (a space, a closing mark)."""
    from nslm.transformer.generate import MixtureStepper

    stepper = MixtureStepper(run, prompt, micro=micro)
    tokenizer = run.bundle.checkpoint.tokenizer
    word = ""
    for k in range(max_tokens):
        token = int(np.argmax(stepper.distribution()))
        text = tokenizer.decode([token])
        if k and (not text or not (text[0].isalnum() or text[0] in ".,") or text[0] == " "):
            break
        word += text
        stepper.advance(token)
    return word.strip()


def generation(run, text_pass, positions, functions, limit: int, progress: bool) -> dict:
    """Greedy decoding after the first ``limit`` conversions' parentheses of the text (the
    text before them as the prompt): the word each model writes, right when it is what the
    text wrote and within 2% of the exact conversion (``conversion_correct``); and over those
    and as many other computed positions, whether greedy decoding writes the text's word
    (``top1_exact``)."""
    text = text_pass.text
    conversions, others = [], []
    for p, names in positions:
        (conversions if "convert" in names.split("+") else others).append(p)
    rng = np.random.default_rng(0)
    picked_others = sorted(rng.choice(others, size=min(len(others), limit // 2), replace=False))
    chosen = [("convert", p) for p in conversions[:limit]]
    chosen += [("other", int(p)) for p in picked_others]
    starts = documents_of_split(text.strings, text.split.article_ids)
    doc_start = {p: s for s, e in starts for p in range(s, e)}
    import dataclasses

    without = dataclasses.replace(run, function_weights={})
    models = {
        "Transformer": (run, False),
        "Transformer+MM": (without, True),
        "Transformer+functions": (run, True),
    }
    right = {m: [] for m in models}
    exact = {m: [] for m in models}
    examples = []
    t0 = time.perf_counter()
    for n, (kind, p) in enumerate(chosen):
        a = int(text_pass.ranges[p][0])
        start = int(text_pass.offsets[a][0])
        prompt = prompt_text(text_pass.plain, start)
        gold = text.strings[p]
        s = doc_start[p]
        refs = functions.references(list(text.strings[s:p]), p - s)
        exacts = [v for r in refs if r.function == "convert" for v in (r.exact or (r.value,))]
        got = {}
        for model, (which, micro) in models.items():
            word = greedy_word(which, prompt, micro)
            got[model] = word
            exact[model].append(word == gold)
            if kind == "convert":
                close = is_number(word) and any(
                    abs(number_value(word) - v) <= 0.02 * abs(v) for v in exacts if v
                )
                right[model].append(word == gold and close)
        if len(examples) < 12:
            examples.append({"prompt_end": prompt[-60:], "gold": gold, **got})
        if progress and n % 20 == 0:
            print(f"  generation {n}/{len(chosen)} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return {
        "n": sum(k == "convert" for k, _ in chosen),
        "conversion_correct": {m: float(np.mean(v)) for m, v in right.items()},
        "top1_exact": {m: float(np.mean(v)) for m, v in exact.items()},
        "top1_positions": len(chosen),
        "top1_reading": "greedy decoding of the next word (token by token, the likeliest)",
        "examples": examples,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def prompts(run) -> dict:
    from nslm.transformer.commands import predict

    out = {}
    for prompt in PROMPTS:
        got = predict(run, prompt, k=5)
        out[prompt] = {m: [[w["word"], round(w["p"], 4)] for w in got[m]] for m in MODELS}
        out[prompt]["functions"] = got.get("function_detail", "")
    return out


def year_after_new(run) -> dict:
    """For each "… in Y … and ended in" with Y unseen in training: whether the likeliest
    year of Transformer+functions lies in (Y, Y + 10]."""
    from nslm.transformer.commands import predict

    train_years = {s for s in run.corpus.vocab.itos if is_year_shaped(s)}
    out = {}
    for template, year in YEAR_PROMPTS:
        assert str(year) not in train_years, year
        prompt = template.format(y=year)
        got = predict(run, prompt, k=40)
        years = [w["word"] for w in got["Transformer+functions"] if is_year_shaped(w["word"])]
        first = int(years[0]) if years else None
        plain = [w["word"] for w in got["Transformer"] if is_year_shaped(w["word"])]
        out[prompt] = {
            "ok": first is not None and year < first <= year + 10,
            "first_year": first,
            "transformer_first_year": int(plain[0]) if plain else None,
        }
    return out


def sums_check(run, text_pass, positions, excerpts: int = 8) -> dict:
    """The mixture's whole next-token distribution with the functions in, at every step of
    the walk over excerpts of the text around positions where functions fire: the largest
    |Σ − 1| and the largest gap to the walk's probability of the text's token."""
    from nslm.transformer.backbone import full_log_probs
    from nslm.transformer.commands import mixture_parts
    from nslm.transformer.scoring import sums_to_one

    worst, gap, count = 0.0, 0.0, 0
    step = max(1, len(positions) // excerpts)
    for p, _ in positions[::step][:excerpts]:
        a = int(text_pass.ranges[p][0])
        start = int(text_pass.offsets[a][0])
        excerpt = prompt_text(text_pass.plain, start, 400) + text_pass.plain[start : start + 120]
        parts = mixture_parts(run, excerpt, "excerpt")
        ids = parts.text_pass.ids
        rows = full_log_probs(run.bundle.model, ids, run.bundle.checkpoint.start_id)[: len(ids)]
        got = sums_to_one(parts, rows, run.lams, 0, run.function_weights)
        worst, gap = max(worst, got["max_error"]), max(gap, got["max_gap"])
        count += got["positions"]
    return {"positions": count, "max_error": worst, "max_gap": gap}


def text_passes(run, progress: bool = True) -> dict:
    """WikiText-2 test and EWT test through the Transformer, as transformer_nslm.py scores
    them (the same plain texts, so the passes kept in RUN/scores serve both)."""
    from nslm.transformer.passes import score_text
    from transformer_nslm import texts

    out = {}
    for name, plain in texts({"test": 0, "ewt": 0}).items():
        out[name] = score_text(
            run.bundle,
            run.corpus,
            run.members,
            plain,
            name,
            cache_dir=run.run_dir / "scores",
            progress=progress,
        )
    return out


def transformer_rows(run_dir: Path, generation_limit: int = 100, progress: bool = True) -> dict:
    """Everything the issue asks of the Transformer, as functions.json's keys."""
    from nslm.transformer.scoring import MixtureParts

    t0 = time.perf_counter()
    run, fitted = open_run(run_dir, progress)
    passes = text_passes(run, progress)
    out: dict = {"run": str(run_dir), "function_weights": run.function_weights, "fit": fitted}
    parts = {}
    for name, key in (("test", "wt2_test"), ("ewt", "ewt_test")):
        text_pass = passes[name]
        parts[name] = MixtureParts(
            text_pass,
            run.members,
            run.models,
            run.head,
            run.class_names,
            cache=True,
            functions=run.functions,
        )
        out[key], scored = rows(run, parts[name])
        if name == "test":
            positions = function_positions(text_pass, run.functions)
            out["computed_wt2_test"] = computed(parts[name], scored, positions)
            strings = text_pass.text.strings
            numbers = [(p, n) for p, n in positions if is_number(strings[p])]
            out["computed_wt2_test_numbers"] = computed(parts[name], scored, numbers)
        if progress:
            print(f"{key}: {out[key]}", flush=True)
    test = passes["test"]
    out["sums_to_one"] = sums_check(run, test, positions)
    out["generation"] = generation(run, test, positions, run.functions, generation_limit, progress)
    for model, share in out["generation"]["top1_exact"].items():
        out["computed_wt2_test"][model]["top1_exact"] = share
        out["computed_wt2_test"][model]["top1_positions"] = out["generation"]["top1_positions"]
    out["prompts"] = prompts(run)
    out["transformer_year_after_new"] = year_after_new(run)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out
