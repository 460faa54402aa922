"""Sampling (word, tag) pairs from a word+POS run (docs/word-pos.md).

Each step samples from the model's own factorisation, with the shared sampler (temperature,
top-k, top-p, seed):

- joint: the tag from P(t | h), then the word from P(w | t, h);
- Eq. 11: the word from Q(w | X), then the tag from [Q(p | w) + Q(p | X)] / 2;
- word-only and multi-task: the word from P(w | h); they generate no tag.

A prompt word may carry its tag (``dogs/NNS``); an untagged one is tagged by the model as
the tagger would (greedy), so the history always holds a tag.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from nslm.errors import NslmError
from nslm.generation.sampling import Sampler
from nslm.word_pos.run import WordPosRun
from nslm.word_pos.vocab import BOS, EOS, shape_id

Pair = tuple[str, str | None]


def _step_inputs(run: WordPosRun, word: str, tag: str) -> list[torch.Tensor]:
    vocab = run.vocab
    ids = [
        vocab.word_id(word),
        vocab.tag_ids[tag],
        vocab.suffix_ids.get(word[-3:].lower(), 0) if word not in (BOS, EOS) else 0,
        shape_id(word) if word not in (BOS, EOS) else 0,
    ]
    return [torch.tensor([[i]]) for i in ids]


def _parse_prompt(run: WordPosRun, prompt: str) -> list[Pair]:
    pairs: list[Pair] = []
    for token in prompt.split():
        word, slash, tag = token.rpartition("/")
        if slash and word and tag in run.vocab.tag_ids and tag not in (BOS, EOS):
            pairs.append((word, tag))
        else:
            pairs.append((token, None))
    return pairs


def _masked(scores: torch.Tensor, *banned: int) -> np.ndarray:
    out = scores.double().clone()
    out[list(banned)] = -math.inf
    return out.numpy()


@torch.no_grad()
def generate_word_pos(
    run: WordPosRun, prompt: str, max_tokens: int, sampler: Sampler
) -> tuple[list[Pair], list[Pair]]:
    """(the prompt's pairs as read, the generated pairs); ``<eos>`` ends a sentence."""
    model, vocab = run.model, run.vocab
    if model.kind == "tagger":
        raise NslmError("a tagger run generates nothing: it tags (see 'nslm eval')")
    reads_tags = model.kind in ("joint", "eq11")
    bos_tag, eos_tag = vocab.tag_ids[BOS], vocab.tag_ids[EOS]
    state, last = None, (BOS, BOS)
    prompt_pairs: list[Pair] = []
    for word, tag in _parse_prompt(run, prompt):
        h, state = model(*_step_inputs(run, *last), state)
        if tag is None and reads_tags:
            ids = torch.tensor([vocab.word_id(word)])
            posterior = model.scores(h[:, 0], ids, ids * 0).tag_posterior
            assert posterior is not None
            tag = vocab.tags[int(np.argmax(_masked(posterior[0], bos_tag)))]
        prompt_pairs.append((word, tag))
        last = (word, tag or BOS)
    generated: list[Pair] = []
    for _ in range(max_tokens):
        h, state = model(*_step_inputs(run, *last), state)
        h = h[:, 0]
        logits = model.word_logits(h)[0].float()
        tag_id: int | None = None
        if model.kind == "joint":
            assert model.tag_word is not None
            tag_id = sampler.sample(_masked(model.tag_log_probs(h)[0], bos_tag), log_space=True)
            logits = logits + model.tag_word[tag_id]
        word_id = sampler.sample(_masked(logits, vocab.bos), log_space=True)
        if tag_id == eos_tag:  # the joint's <eos> tag is the sentence end's alone
            word_id = vocab.eos
        if model.kind == "eq11" and word_id != vocab.eos:
            word = torch.tensor([word_id])
            posterior = model.scores(h, word, word * 0).tag_posterior
            assert posterior is not None
            tag_id = sampler.sample(_masked(posterior[0], bos_tag, eos_tag), log_space=True)
        if word_id == vocab.eos:
            tag_id = eos_tag if reads_tags else None
        tag = vocab.tags[tag_id] if tag_id is not None else None
        generated.append((vocab.words[word_id], tag))
        last = (vocab.words[word_id], tag or BOS)
    return prompt_pairs, generated
