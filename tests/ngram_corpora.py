"""Small corpora for the n-gram tests: a synthetic Markov text and streams of hand-written lines."""

from __future__ import annotations

import numpy as np

from nslm.ngram.build import Stream


def lines_stream(lines: list[str], extra: tuple[str, ...] = ("<unk>",)) -> Stream:
    """A stream of whitespace-tokenised lines; ``extra`` types are in the vocabulary unseen."""
    itos = list(extra)
    for line in lines:
        for token in line.split():
            if token not in itos:
                itos.append(token)
    itos.append("</s>")
    stoi = {s: i for i, s in enumerate(itos)}
    ids = [i for line in lines for i in (*(stoi[t] for t in line.split()), stoi["</s>"])]
    unk = stoi.get("<unk>", 0)
    return Stream(ids=np.asarray(ids, dtype=np.int64), itos=itos, eos_id=stoi["</s>"], unk_id=unk)


def markov_stream(n_tokens: int, vocab: int = 1500, seed: int = 0) -> Stream:
    """A Zipfian second-order Markov text with sentence ends: rich enough that every order up
    to 5 sees n-grams with (adjusted) counts 1, 2, 3 and 4, so Kneser-Ney discounts exist."""
    rng = np.random.default_rng(seed)
    zipf = 1.0 / np.arange(1, vocab + 1) ** 1.1
    zipf /= zipf.sum()
    # each (previous word mod 7) picks one of 7 shuffled preference orders over the vocabulary
    prefs = [rng.permutation(vocab) for _ in range(7)]
    eos = vocab
    # recurring phrases (Zipf-distributed too) give long n-grams with small repeat counts
    phrases = [rng.choice(vocab, size=6, p=zipf) for _ in range(60)]
    phrase_p = zipf[:60] / zipf[:60].sum()
    out: list[int] = []
    prev = 0
    while len(out) < n_tokens:
        r = rng.random()
        if r < 0.08:
            out.append(eos)
        elif r < 0.2:
            out.extend(int(x) for x in phrases[rng.choice(60, p=phrase_p)])
        else:
            out.append(int(prefs[prev % 7][rng.choice(vocab, p=zipf)]))
        prev = out[-1]
    ids = np.asarray(out[:n_tokens], dtype=np.int64)
    ids[-1] = eos
    itos = [f"w{i}" for i in range(vocab)] + ["</s>", "<unk>"]
    return Stream(ids=ids, itos=itos, eos_id=eos, unk_id=vocab + 1)
