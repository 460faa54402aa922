"""The numeral models of Spithourakis & Riedel (numerals/model.py) on a tiny synthetic
vocabulary: every distribution is normalised, training lowers the loss, digits come from the
token strings, and the evaluation reads the split it is asked for."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.config import build_config
from nslm.models.lm import LanguageModel
from nslm.numerals.branches import NumeralMoG
from nslm.numerals.model import NUMERAL_MODELS, numeral_targets
from nslm.numerals.vocab import ALPHABET, CHAR_ID, END, START, NumeralSpec, char_ids

WORDS = ["the", ",", ".", "<unk>", "of", "in", "and", "a", "was", "<eos>", "dog", "cat"]
IN_VOCAB = ["1", "2", "1914", "3.5", "1,000", "0.25"]
RARE = ["7", "10"]  # in nslm's vocabulary, seen once in training: <unk_num> for the model


def tiny_spec() -> NumeralSpec:
    itos = WORDS[:4] + IN_VOCAB[:2] + WORDS[4:] + IN_VOCAB[2:] + RARE
    return NumeralSpec(
        itos=itos,
        numerals=IN_VOCAB,
        width=12,
        max_precision=2,
        mog_means=[0.0, 2.0, 10.0, 1500.0],
        mog_stds=[0.5, 1.0, 5.0, 300.0],
        comma_share={"4": 0.3},
        zero_share=0.05,
        candidates=IN_VOCAB + RARE,
        train_mean=100.0,
        train_median=2.0,
    )


def tiny_model(
    name: str, tie: bool = True, cutoffs: tuple = (4, 8), spec: NumeralSpec | None = None
) -> LanguageModel:
    cfg = build_config(
        {
            "heads": ["numeral"],
            "numeral_model": name,
            "emb_size": 16,
            "hidden_size": 16,
            "num_layers": 1,
            "digit_size": 8,
            "cutoffs": list(cutoffs),
            "tie_weights": tie,
            "dropout": 0.0,
        }
    )
    torch.manual_seed(0)
    spec = spec or tiny_spec()
    return LanguageModel(cfg, len(spec.itos), None, spec).eval()


def word_ids(spec: NumeralSpec) -> list[int]:
    return [i for i, t in enumerate(spec.itos) if t in WORDS]


def all_strings(max_len: int):
    for n in range(max_len + 1):
        yield from itertools.product(ALPHABET, repeat=n)


def word_mass(head, h: torch.Tensor) -> torch.Tensor:
    ids = torch.tensor(word_ids(head.spec))
    rows = h.repeat_interleave(len(ids), 0)
    lp = head.log_prob(rows, head.tables.targets(ids.repeat(len(h))))
    return lp.exp().reshape(len(h), -1).sum(1)


@pytest.mark.parametrize("name", ["softmax", "softmax+rnn", "h-softmax", "h-softmax+rnn"])
@pytest.mark.parametrize("cutoffs", [(4, 8), ()])
def test_closed_models_sum_to_one_over_words_numerals_and_unk(name, cutoffs) -> None:
    """Σ_words P + Σ_in-vocabulary numerals P + P(<unk_num>) = 1, adaptive or full softmax."""
    head = tiny_model(name, cutoffs=cutoffs).heads["numeral"]
    h = torch.randn(3, 16) * 3
    nums = numeral_targets(head.spec, IN_VOCAB + RARE[:1])  # one rare string = <unk_num>
    assert nums.num[-1] == head.unk_num
    lp = head.log_prob(h.repeat_interleave(len(IN_VOCAB) + 1, 0), _tile(nums, 3))
    total = word_mass(head, h) + lp.exp().reshape(3, -1).sum(1)
    assert torch.allclose(total, torch.ones(3, dtype=total.dtype), atol=1e-5)


def _tile(t, n):
    from nslm.numerals.model import Targets

    return Targets(**{k: v.repeat(n, *([1] * (v.dim() - 1))) for k, v in vars(t).items()})


def test_rare_numerals_share_unk_num_in_closed_models() -> None:
    head = tiny_model("h-softmax").heads["numeral"]
    h = torch.randn(1, 16)
    a, b = (head.log_prob(h, numeral_targets(head.spec, [s])) for s in RARE)
    assert torch.equal(a, b)


def test_d_rnn_strings_sum_to_one() -> None:
    """Σ_{|s| ≤ L} P(s END | h) + Σ_{|s| = L+1} P(prefix s | h) = 1 exactly (every string
    either ended by length L or has a prefix of length L + 1); with END made likely, the
    unended mass is below 0.05^(L+1), so the strings up to L carry all but that."""
    head = tiny_model("d-rnn").heads["numeral"]
    with torch.no_grad():
        head.drnn.out.bias[END] = 8.0  # P(END) ≥ ~0.95 whatever the state
    h = torch.randn(2, 16)
    length = 3
    ended = torch.zeros(2, dtype=torch.float64)
    strings = ["".join(s) for s in all_strings(length)]
    chars = torch.tensor([char_ids(s, length + 2) for s in strings])
    for b in range(2):
        ended[b] = head.drnn(h[b : b + 1].expand(len(strings), -1), chars).double().exp().sum()
    longer = ["".join(s) for s in itertools.product(ALPHABET, repeat=length + 1)]
    prefix = torch.tensor([[START] + [CHAR_ID[c] for c in s] for s in longer])
    unended = torch.zeros(2, dtype=torch.float64)
    for b in range(2):
        steps = head.drnn.step_log_probs(h[b : b + 1].expand(len(longer), -1), prefix[:, :-1])
        lp = steps.gather(2, prefix[:, 1:].unsqueeze(2)).squeeze(2).double().sum(1)
        unended[b] = lp.exp().sum()
    assert torch.allclose(ended + unended, torch.ones(2, dtype=torch.float64), atol=1e-5)
    assert (unended < 0.05 ** (length + 1)).all()
    # and the word part plus P(numeral | h) is the rest: the d-RNN model's whole distribution
    branch = torch.softmax(head.branch(h).double(), -1)[:, 1]
    assert torch.allclose(word_mass(head, h) + branch, torch.ones(2, dtype=torch.float64))


@settings(max_examples=25, deadline=None)
@given(
    means=st.lists(st.floats(0, 20), min_size=1, max_size=4),
    spread=st.floats(0.2, 3.0),
    r=st.integers(0, 1),
)
def test_mog_intervals_of_the_grid_sum_to_one(means, spread, r) -> None:
    """For each precision r the intervals of the values 0, 10⁻ʳ, 2·10⁻ʳ, … (up to far past
    every Gaussian) carry the whole mixture: the truncation Z_k(r) gives back the mass below
    the grid."""
    stds = [spread * (1 + i) for i in range(len(means))]
    mog = NumeralMoG(4, means, stds, max_r=2).double()
    h = torch.randn(3, 4, dtype=torch.float64)
    grid = torch.arange(0, int(80 * 10**r)) / 10**r
    rs = torch.full((len(grid),), r)
    lp = torch.stack([mog(h[b : b + 1].expand(len(grid), -1), grid, rs) for b in range(3)])
    p_r = torch.softmax(mog.precision(h), -1)[:, r]
    assert torch.allclose(lp.exp().sum(1), p_r, atol=1e-9)


def test_mog_far_values_stay_finite() -> None:
    """A value 10⁹ standard deviations away still gets a finite log-probability."""
    mog = NumeralMoG(4, [0.0, 3.0], [1.0, 2.0], max_r=1).double()
    lp = mog(torch.zeros(1, 4, dtype=torch.float64), torch.tensor([1.5e9]), torch.tensor([0]))
    assert torch.isfinite(lp).all() and lp.item() < -1e15


def test_spellings_of_one_value_sum_to_one() -> None:
    """1000 and 1,000 (and 01000, 001,000, …) share the value's mass by the spelling shares."""
    spec = tiny_spec()
    forms = [z * "0" + s for z in range(40) for s in ("1000", "1,000")]
    total = sum(math.exp(spec.spelling_log_prob(f)) for f in forms)
    assert total == pytest.approx(1.0, abs=1e-12)
    assert spec.spelling_log_prob("10,00") == -math.inf


@pytest.mark.parametrize("name", ["combination"])
def test_combination_sums_to_one_and_never_uses_unk_num(name) -> None:
    head = tiny_model(name).heads["numeral"]
    h = torch.randn(2, 16)
    logits = head.num_logits(h)
    assert torch.isinf(logits[:, -1]).all()
    cat = torch.softmax(logits, -1)[:, :-1].sum(1)
    assert torch.allclose(cat, torch.ones(2), atol=1e-6)
    rare = head.log_prob(h, _tile(numeral_targets(head.spec, RARE[:1]), 2))
    assert torch.isfinite(rare).all()  # an unseen numeral comes from the d-RNN, never −inf


def test_from_corpus_priors_are_the_training_shares() -> None:
    """log_prior: each kept numeral's share of the numeral tokens, the rest on <unk_num>;
    numeral_share: the numerals' share of all training tokens."""
    from types import SimpleNamespace

    itos = ["the", "1914", "2", "7", "dog"]
    train = [0, 1, 1, 1, 2, 2, 3, 4, 4, 0, 0, 0]  # 1914 ×3, 2 ×2, 7 ×1 (rare: <unk_num>)
    counts = np.bincount(train, minlength=len(itos))
    corpus = SimpleNamespace(
        vocab=SimpleNamespace(itos=itos, counts=counts),
        train=SimpleNamespace(token_ids=np.array(train)),
    )
    spec = NumeralSpec.from_corpus(corpus, min_count=2, levels=2)
    assert spec.numerals == ["1914", "2"]
    assert np.allclose(np.exp(spec.log_prior), [3 / 6, 2 / 6, 1 / 6])
    assert spec.numeral_share == pytest.approx(6 / 12)


@pytest.mark.parametrize("name", ["softmax", "h-softmax"])
def test_a_fresh_head_starts_at_the_training_priors(name) -> None:
    """Before any training, P(numeral) ≈ the numerals' training share (the flat softmax's
    word biases are random, hence the tolerance) and P(n | numeral) = their priors; from
    default biases the flat softmax put most of its mass on numerals and stalled."""
    spec = tiny_spec()
    spec.log_prior = np.log([0.3, 0.2, 0.2, 0.1, 0.1, 0.05, 0.05]).tolist()
    spec.numeral_share = 0.03
    head = tiny_model(name, spec=spec).heads["numeral"]
    nums = numeral_targets(spec, IN_VOCAB + RARE[:1])
    with torch.no_grad():
        p = head.log_prob(torch.zeros(len(IN_VOCAB) + 1, 16), nums).exp()
    assert float(p.sum()) == pytest.approx(0.03, rel=0.15)
    assert np.allclose((p / p.sum()).numpy(), np.exp(spec.log_prior), atol=1e-6)


@pytest.mark.parametrize("name", NUMERAL_MODELS)
def test_a_batch_without_targets_still_backpropagates(name) -> None:
    """An epoch's last window can leave one DDP rank no target: its loss must still be part
    of the graph (the hierarchical models once returned a bare tensor there, and a two-process
    training stopped at the first epoch's end with "does not require grad")."""
    model = tiny_model(name).train()
    x = torch.zeros(3, 2, dtype=torch.long)
    loss, _, _ = model(x, x, x, torch.zeros(3, 2, dtype=torch.bool))
    loss.backward()
    assert loss.requires_grad and float(loss.detach()) == 0.0


def test_digits_come_from_the_token_string() -> None:
    """A 9-significant-digit numeral keeps every digit (float32 would make 123456792)."""
    token = "123,456,789"
    assert float(np.float32(123456789)) != 123456789.0
    chars = char_ids(token, 16)
    decoded = "".join(ALPHABET[c - 3] for c in chars if c >= 3)
    assert decoded == token
    t = numeral_targets(tiny_spec(), [token])
    assert t.value.item() == 123456789.0 and t.value.dtype == torch.float64


@pytest.mark.parametrize("name", NUMERAL_MODELS)
def test_a_training_step_lowers_the_loss(name) -> None:
    model = tiny_model(name, tie=name != "d-rnn").train()
    spec = model.heads["numeral"].spec
    gen = torch.Generator().manual_seed(1)
    x = torch.randint(0, len(spec.itos), (12, 4), generator=gen)
    y = torch.randint(0, len(spec.itos), (12, 4), generator=gen)
    c = torch.zeros_like(y)
    mask = torch.ones_like(y, dtype=torch.bool)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        loss, _, _ = model(x, y, c, mask)
        assert torch.isfinite(loss)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


# -- a tiny real run: training through ``nslm train``'s loop, then the evaluation ----------


def _write_corpus(root, rng) -> dict[str, list[str]]:
    """train/valid/test files whose numerals differ: valid and test each hold their own."""
    words = ["the", "dog", "was", "in", "of", "a", "cat", "and"]
    pools = {"train": ["1", "2", "1914", "3.5", "1,000", "12"], "valid": ["777"], "test": ["4,242"]}
    numerals = {}
    for split in ("train", "valid", "test"):
        lines, seen = [" = Heading = "], []
        for _ in range(400 if split == "train" else 40):
            pool = pools["train"] + pools[split] if split != "train" else pools["train"]
            num = pool[rng.integers(len(pool))]
            seen.append(num)
            text = num.replace(",", " @,@ ").replace(".", " @.@ ")
            before, after = " ".join(rng.choice(words, 3)), " ".join(rng.choice(words, 2))
            lines.append(f"{before} {text} {after}")
        (root / f"{split}.txt").write_text("\n".join(lines) + "\n")
        numerals[split] = seen
    return numerals


def _train_tiny_run(tmp_path, monkeypatch, name: str, seed: int, **extra) -> tuple:
    """A numeral model ``name`` trained for a few steps through ``nslm train``'s loop on the
    corpus of :func:`_write_corpus`: (the run loaded, the corpus folder, its numerals)."""
    from nslm.config import load_config
    from nslm.runs.load import load_run
    from nslm.training.loop import train

    monkeypatch.setenv("NSLM_CACHE_DIR", str(tmp_path / "cache"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    numerals = _write_corpus(corpus, np.random.default_rng(seed))
    sets = {
        "corpus": str(corpus),
        "heads": "['numeral']",
        "numeral_model": name,
        "emb_size": 16,
        "hidden_size": 16,
        "num_layers": 1,
        "digit_size": 8,
        "batch_size": 4,
        "bptt": 10,
        "max_steps": 3,
        "epochs": 1,
        "progress": "false",
        "threads": 1,
        "eval_batch_size": 4,
        "cutoffs": "[4]",
        **extra,
    }
    train(load_config(None, [f"{k}={v}" for k, v in sets.items()]), tmp_path / "run")
    return load_run(tmp_path / "run"), corpus, numerals


@pytest.mark.parametrize("name", ["h-softmax", "d-rnn"])
def test_evaluation_reads_the_split_it_is_asked_for(tmp_path, monkeypatch, name) -> None:
    from nslm.numerals.scoring import score_numerals

    loaded, _, numerals = _train_tiny_run(tmp_path, monkeypatch, name, 0, tie_weights="true")
    for split in ("valid", "test"):
        scores = score_numerals(loaded, split)
        assert scores.tokens == numerals[split]
        assert np.isfinite(scores.log_prob).all()
        own = {"valid": "777", "test": "4,242"}[split]
        assert not scores.in_vocab[[t == own for t in scores.tokens]].any()
        summary = scores.summary()
        assert summary["n_tokens"] == len(numerals[split])
        assert summary["num_ppl_adjusted"] > 1.0 and summary["num_ppl_proper"] > 1.0
        assert set(scores.predicted) <= {float(c.replace(",", "")) for c in scores.candidates}
        charge = scores.log_prob - scores.log_prob_adjusted
        if name == "d-rnn":  # open: the string itself, one figure under both conventions
            assert not scores.unk.any() and np.array_equal(charge, np.zeros_like(charge))
    if name == "h-softmax":  # closed: the unseen numeral is one <unk_num> type in the text
        from nslm.numerals.scoring import unk_num_spelling

        assert scores.unk[[t == "4,242" for t in scores.tokens]].all()
        # proper: P(<unk_num>)·P_spell(s | s ∉ K) where adjusted charges P(<unk_num>)/|U|
        rare = [t for t, u in zip(scores.tokens, scores.unk, strict=True) if u]
        spelling = unk_num_spelling(loaded.model.heads["numeral"].spec)
        want = spelling.log_prob_outside(rare) + math.log(len(set(rare)))
        np.testing.assert_allclose(charge[scores.unk], want)
        assert np.array_equal(charge[~scores.unk], np.zeros((~scores.unk).sum()))


def test_a_prepared_split_scores_as_the_runs_own(tmp_path, monkeypatch) -> None:
    """``score_numerals`` on a prepared :class:`Split` with its strings (what Table 4 passes:
    a text prepared with the run's vocabulary) gives the figures of the run's own split;
    without strings, or with strings of another length, it refuses."""
    from nslm.data.fixed_vocab import prepare_text_file
    from nslm.numerals.scoring import score_numerals
    from nslm.scores.passes import head_of

    loaded, corpus, numerals = _train_tiny_run(tmp_path, monkeypatch, "h-softmax", 1)
    text = prepare_text_file(loaded.corpus, corpus / "test.txt", "test", "tokenized")
    own = score_numerals(loaded, "test")
    got = score_numerals(loaded, text.split, strings=text.strings, candidates=own.candidates)
    assert got.split == "test" and got.tokens == own.tokens == numerals["test"]
    np.testing.assert_array_equal(got.positions, own.positions)
    np.testing.assert_array_equal(got.in_vocab, own.in_vocab)
    np.testing.assert_allclose(got.log_prob, own.log_prob, rtol=1e-6)
    np.testing.assert_allclose(got.log_prob_adjusted, own.log_prob_adjusted, rtol=1e-6)
    np.testing.assert_array_equal(got.predicted_index, own.predicted_index)
    # a cut split with its strings cut alike: the numerals of those tokens only
    cut = head_of(text.split, 200)
    part = score_numerals(loaded, cut, strings=text.strings[:200], predict=False)
    assert part.positions.max() < 200 and part.predicted_index is None
    assert part.tokens == [text.strings[i] for i in part.positions.tolist()]
    with pytest.raises(ValueError, match="needs its token strings"):
        score_numerals(loaded, text.split)
    with pytest.raises(ValueError, match=f"{len(text.strings) - 1} strings for a split of"):
        score_numerals(loaded, text.split, strings=text.strings[:-1])


def test_the_prefix_tree_refuses_a_d_rnn_it_does_not_step() -> None:
    """``drnn_trie_scores`` steps a one-layer LSTM without projection by hand: any other
    d-RNN is refused, not scored wrong."""
    from nslm.errors import NslmError
    from nslm.numerals.scoring import CandidateTrie, drnn_trie_scores

    head = tiny_model("d-rnn").heads["numeral"]
    trie = CandidateTrie.of(numeral_targets(head.spec, IN_VOCAB).chars)
    lstm = head.drnn.lstm
    head.drnn.lstm = torch.nn.LSTM(lstm.input_size, lstm.hidden_size, num_layers=2)
    with pytest.raises(NslmError, match="1-layer LSTM without projection"):
        drnn_trie_scores(head.drnn, torch.randn(2, 16), trie)


def spelling_mass(model, max_len: int = 400) -> tuple[float, float]:
    """(Σ P_spell(s) over the byte strings of up to ``max_len`` bytes, what is left on the
    longer ones), by dynamic programming over the model's contexts: the next-symbol
    distribution of a history is that of its longest seen suffix (the contexts that
    ``normalisation_check`` walks), and so is the next history's. A state is such a
    suffix, padded in front by a symbol no context holds, so that it stays the longest."""
    from nslm.scores.spelling import BEGIN, END

    seen = list(model._contexts)
    index = {c: i for i, c in enumerate(seen)}
    size = model.order - 1

    def state(history: tuple[int, ...]) -> int:
        history = history[len(history) - size :] if size else ()
        for length in range(len(history), -1, -1):
            suffix = history[len(history) - length :]
            if suffix in index:
                return index[suffix]
        raise AssertionError("the empty context is always seen")

    dists = np.array([model._distribution((-1,) * (size - len(c)) + c) for c in seen])
    step = np.array([[state((*c, b)) for b in range(256)] for c in seen])
    mass = np.zeros(len(seen))
    mass[state((BEGIN,) * size)] = 1.0
    ended = []
    for _ in range(max_len + 1):
        ended.append(float(mass @ dists[:, END]))
        nxt = np.zeros(len(seen))
        np.add.at(nxt, step.ravel(), (mass[:, None] * dists[:, :256]).ravel())
        mass = nxt
    return math.fsum(ended), float(mass.sum())


def test_the_unk_num_spelling_model_sums_to_one_over_every_string_outside_k() -> None:
    """P_spell(s | s ∉ K), what a closed model's P(<unk_num> | h) is spread by: every
    context of ``normalisation_check`` sums to one with END possible, so P_spell totals one
    over all byte strings (≈ 1 within 1e-9 by the dynamic programme, the mass left on longer
    strings below 1e-12), hence P_spell(s | s ∉ K) totals one outside K, −inf on K; and
    more on the rare training numerals it learnt from than on a long unseen one."""
    from nslm.numerals.scoring import unk_num_spelling

    rng = np.random.default_rng(0)
    rare = [*sorted({str(int(x)) for x in rng.integers(0, 10**6, 300)}), "3.25", "1,250"]
    specs = [tiny_spec(), dataclasses.replace(tiny_spec(), itos=WORDS + rare)]
    for spec in specs:
        spelling = unk_num_spelling(spec)
        check = spelling.normalisation_check()
        assert check["next_symbol_max_error"] < 1e-12
        assert check["least_end_probability"] > 0
        total, left = spelling_mass(spelling)
        assert left < 1e-12
        assert total == pytest.approx(1.0, abs=1e-9)
        in_k = math.fsum(np.exp(spelling.log_prob(spec.numerals)).tolist())
        outside = (total - in_k) / math.exp(spelling.log_mass_outside)
        assert outside == pytest.approx(1.0, abs=1e-9)
        lp = spelling.log_prob_outside([*spec.numerals, "5"])
        assert np.isneginf(lp[:-1]).all() and np.isfinite(lp[-1])
    # the programme is the scoring's: strings of up to one byte by log_prob, one at a time
    short = [b""] + [bytes([b]) for b in range(256)]
    by_string = math.fsum(np.exp(spelling.log_prob(short)).tolist())
    assert spelling_mass(spelling, max_len=1)[0] == pytest.approx(by_string, rel=1e-12)
    rare_lp, other = spelling.log_prob_outside([rare[0], "98765,4.3"])
    assert rare_lp > other


def test_the_spelling_checks_catch_a_context_that_does_not_sum_to_one() -> None:
    """The checks above can fail: one count too many in the Witten-Bell denominator of the
    start context (c(h) + N1+(h •)) leaves its next-symbol distribution, and so the total
    over all strings, short of one."""
    from nslm.numerals.scoring import unk_num_spelling
    from nslm.scores.spelling import BEGIN

    spelling = unk_num_spelling(tiny_spec())
    broken = copy.copy(spelling)
    broken._contexts = dict(spelling._contexts)
    start = (BEGIN,) * (spelling.order - 1)
    seen, denominator, distinct = broken._contexts[start]
    broken._contexts[start] = (seen, denominator + 1, distinct)
    assert broken.normalisation_check()["next_symbol_max_error"] > 1e-3
    total, left = spelling_mass(broken)
    assert left < 1e-12 and abs(total - 1.0) > 1e-3


@pytest.mark.parametrize("name", ["softmax", "h-softmax+rnn"])
def test_a_candidate_outside_k_gets_unk_num_times_its_spelling(name) -> None:
    """The proper mode: a candidate outside the numeral vocabulary is scored P(<unk_num> | h)
    · P_spell(s | s ∉ K); without a spelling model <unk_num> names no value (−inf). With the
    charge, words + K + the enumerated strings outside K still hold at most one."""
    from nslm.numerals.scoring import candidate_scores, unk_num_spelling

    head = tiny_model(name).heads["numeral"]
    spelling = unk_num_spelling(head.spec)
    strings = IN_VOCAB + RARE + ["123", "4.5"]
    cands = numeral_targets(head.spec, strings)
    outside = cands.num == head.unk_num
    charge = torch.zeros(len(strings), dtype=torch.float64)
    charge[outside] = torch.from_numpy(
        spelling.log_prob_outside([s for s, o in zip(strings, outside, strict=True) if o])
    )
    h = torch.randn(3, 16)
    got = candidate_scores(head, h, cands, charge)
    cat = torch.log_softmax(head.num_logits(h).double(), dim=-1)
    want = torch.where(outside, cat[:, head.unk_num : head.unk_num + 1] + charge, cat[:, cands.num])
    assert torch.allclose(got, want)
    assert torch.isneginf(candidate_scores(head, h, cands)[:, outside]).all()
    # the whole proper distribution: words, K, and <unk_num> spread over strings outside K
    every = ["".join(s) for s in all_strings(3)]
    rest = [s for s in every if s not in head.spec.numerals]
    spread = np.exp(spelling.log_prob_outside(rest)).sum()
    known = numeral_targets(head.spec, IN_VOCAB + RARE[:1])
    lp = head.log_prob(h.repeat_interleave(len(IN_VOCAB) + 1, 0), _tile(known, 3))
    lp = lp.exp().reshape(3, -1)
    total = word_mass(head, h) + lp[:, :-1].sum(1) + lp[:, -1] * spread
    assert (total <= 1 + 1e-6).all()


def test_d_rnn_over_the_prefix_tree_is_the_d_rnn_string_by_string() -> None:
    """:func:`drnn_trie_scores` (every candidate from every state, prefixes shared) gives
    the d-RNN's own log P(string | h), a candidate that is another's prefix included."""
    from nslm.numerals.scoring import CandidateTrie, drnn_trie_scores

    head = tiny_model("d-rnn").heads["numeral"]
    strings = [*IN_VOCAB, *RARE, "19", "191", "0.5", "12,345", "1,0"]
    cands = numeral_targets(head.spec, strings)
    trie = CandidateTrie.of(cands.chars)
    assert len(trie.parent) < sum(len(s) + 1 for s in strings)  # shared prefixes
    h = torch.randn(5, 16)
    got = drnn_trie_scores(head.drnn, h, trie)
    with torch.no_grad():
        rows = h.repeat_interleave(len(strings), 0)
        want = head.drnn(rows, cands.chars.repeat(5, 1)).double().reshape(5, -1)
    assert torch.allclose(got, want, atol=1e-5)


def test_digit_encoding_ignores_padding() -> None:
    from nslm.numerals.branches import DigitEncoder

    torch.manual_seed(0)
    enc = DigitEncoder(8, 5)
    strings = ["7", "1,914", "3.25"]
    narrow = torch.tensor([char_ids(s, 7) for s in strings])
    wide = torch.tensor([char_ids(s, 20) for s in strings])
    assert torch.allclose(enc(narrow), enc(wide), atol=1e-6)
    assert not torch.allclose(enc(narrow[:1]), enc(narrow[1:2]))


def test_d_rnn_score_ignores_padding() -> None:
    head = tiny_model("d-rnn").heads["numeral"]
    h = torch.randn(3, 16)
    strings = ["7", "1,914", "3.25"]
    narrow = torch.tensor([char_ids(s, 7) for s in strings])
    wide = torch.tensor([char_ids(s, 20) for s in strings])
    assert torch.allclose(head.drnn(h, narrow), head.drnn(h, wide), atol=1e-6)


@settings(max_examples=50, deadline=None)
@given(
    gold=st.lists(st.floats(0.5, 1e6), min_size=1, max_size=30),
    factor=st.floats(0.0, 3.0),
)
def test_value_metrics_of_a_proportional_error(gold, factor) -> None:
    """Predicting (1 + f)·y everywhere: every APE is 100·f, so MAPE = MdAPE = 100·f."""
    from nslm.numerals.value_metrics import value_metrics

    y = np.array(gold)
    got = value_metrics(y, y * (1 + factor))
    assert got["mape"] == pytest.approx(100 * factor, rel=1e-9, abs=1e-9)
    assert got["mdape"] == pytest.approx(100 * factor, rel=1e-9, abs=1e-9)
    assert got["mdae"] == pytest.approx(np.median(y * factor), rel=1e-9, abs=1e-9)


def test_value_metrics_leave_zero_gold_out_of_percentages() -> None:
    from nslm.numerals.value_metrics import baseline_metrics, value_metrics

    got = value_metrics(np.array([0.0, 10.0, 20.0]), np.array([5.0, 15.0, 20.0]))
    assert got["n_zero"] == 1 and got["mape"] == pytest.approx(25.0)  # (50% + 0%) / 2
    assert got["mdae"] == 5.0
    base = baseline_metrics(np.array([10.0, 30.0]), train_mean=20.0, train_median=10.0)
    assert base["train_median"]["mdae"] == 10.0 and base["train_mean"]["mape"] == pytest.approx(
        (100 + 100 / 3) / 2
    )
