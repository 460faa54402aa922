"""The next words after a prompt: the Transformer's, and the Transformer's with
micro-models, each member with its class × micro-model breakdown.

The Transformer's probability of a member w is that of its event E_w
(:mod:`nslm.transformer.candidates`): P_T(τ(w)) · P_T(the word ends | τ(w)), found by a
beam over the members' trie (the ``beam`` most probable prefixes at each depth, each
depth one batched pass; a member outside the beam gets P_T(E_w) ≈ 0, a lower bound). A
word that is not a member is listed as one of the Transformer's most probable next tokens
taken whole, with the probability that the word ends after it (the next token neither
extends it nor continues a member that begins with it). With micro-models,

    P(w) = (1 − G) · P_T(E_w) + Σ_c λ_c · P(c | h) · P_MM(w | c, w_prev^(c))

(:mod:`nslm.transformer.mixture`), and a non-member word gets (1 − G) · P_T(word).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nslm.data.conversions import pending_conversion, unit_map_from_json
from nslm.data.text import EOS_TOKENS
from nslm.transformer.candidates import Members
from nslm.transformer.mixture import _log1m, _lse
from nslm.transformer.prompts import prepared_slot
from nslm.transformer.run import TransformerRun
from nslm.transformer.scoring import gate as log_gate


@dataclass
class Word:
    text: str
    transformer: float  # P_T(word)
    mixture: float  # P(word) with the micro-models
    member: bool
    parts: dict[str, float] = field(default_factory=dict)  # class → λ_c P(c|h) P_MM(w|c)
    functions: float = 0.0  # P(word) with the micro-models and the functions
    function_part: float = 0.0  # of which W · P_fun(w)


def _forward(model: Any, sequences: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Last-position log-distributions (B, V) and hidden states (B, D) of sequences."""
    import torch

    width = max(len(s) for s in sequences)
    inp = torch.zeros((len(sequences), width), dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, s in enumerate(sequences):
        inp[i, : len(s)] = torch.as_tensor(s)
        mask[i, : len(s)] = 1
    last = torch.as_tensor([len(s) - 1 for s in sequences])
    with torch.inference_mode():
        states = model.model(input_ids=inp, attention_mask=mask).last_hidden_state
        h = states[torch.arange(len(sequences)), last]
        rows = model.lm_head(h).float().log_softmax(-1)
    return rows.double().numpy(), h.float().numpy()


def _end_mass(row: np.ndarray, members: Members, spelling: Any, member: int) -> float:
    f = members.continuing.copy()
    f[spelling.children[member]] = True
    return _log1m(_lse(row[f]))


def member_events(
    model: Any, prompt_ids: list[int], members: Members, spelling: Any, first: np.ndarray, beam: int
) -> np.ndarray:
    """log P_T(E_w) for every member (−inf outside the beam); ``first``: the root's row."""
    out = np.full(len(members.strings), -np.inf)
    frontier = []
    for token in spelling.first:
        frontier.append(((int(token),), float(first[token])))
    frontier.sort(key=lambda x: -x[1])
    frontier = frontier[:beam]
    depth = 1
    while frontier:
        rows, _ = _forward(model, [prompt_ids + list(p) for p, _ in frontier])
        nxt = []
        for (prefix, logp), row in zip(frontier, rows, strict=True):
            width = len(prefix)
            on = np.flatnonzero(
                (spelling.lengths >= width)
                & np.all(spelling.tokens[:, :width] == np.asarray(prefix), axis=1)
            )
            for w in on[spelling.lengths[on] == width]:
                out[w] = logp + _end_mass(row, members, spelling, int(w))
            longer = on[spelling.lengths[on] > width]
            for token in np.unique(spelling.tokens[longer, width]):
                nxt.append(((*prefix, int(token)), logp + float(row[token])))
        nxt.sort(key=lambda x: -x[1])
        frontier = nxt[:beam]
        depth += 1
    return out


def micro_at_end(run: TransformerRun, text: str, h: np.ndarray) -> dict[str, np.ndarray]:
    """log P_MM(· | c, w_prev^(c)) over each V_c for the word after ``text``, for every class
    whose λ_c > 0; ``h``: the Transformer's state there (a context-aware micro-model reads
    it). The text is prepared as the corpus was, with a placeholder word for the next slot
    (its conversion target: the quantity pending before it, as nslm.generation.prompts
    gives the LSTM's slot)."""
    corpus = run.corpus
    prepared = prepared_slot(corpus, text)
    split = prepared.split
    at = max(i for i, t in enumerate(prepared.strings) if t not in EOS_TOKENS)
    unit_map = unit_map_from_json(corpus.meta.get("unit_map", {}))
    split.convert_targets[at] = pending_conversion(list(prepared.strings[:at]), unit_map)
    slot = np.array([at])
    out = {}
    for name, model in run.models.items():
        if float(run.lams.get(name, 0.0)) <= 0:
            continue
        ctx = model.cls.context(split, slot, model.context)
        states = h[None, :] if getattr(model, "needs_features", False) else None
        out[name] = model.log_prob(ctx, states)[0]
    return out


def next_words(
    run: TransformerRun, prompt: str, *, k: int = 5, beam: int = 16, tokens: int = 10
) -> dict[str, Any]:
    """The top ``k`` next words of the Transformer and of the mixture after ``prompt``
    (the run's micro-models weighted by its λ_c), and, where the run has functions, of the
    mixture with them (``"functions"``: the functions' strings are members here,
    :mod:`nslm.transformer.functions`)."""
    from nslm.transformer.sites import number_mass, prompt_site

    members, head, lams = run.members, run.head, run.lams
    tok = run.bundle.checkpoint.tokenizer
    model = run.bundle.model
    ids = [run.bundle.checkpoint.start_id, *tok.encode(prompt, add_special_tokens=False).ids]
    rows, hidden = _forward(model, [ids])
    row, h = rows[0], hidden[0]
    site = prompt_site(run, prompt) if run.functions is not None else None
    local = site.members if site is not None else members
    before = prompt[-1] if prompt else None
    # the events of the root's members: a function's string (23.3) is a word of its own, so
    # the member it extends (23) ends only where it does not go on towards it
    log_event = member_events(model, ids, local, local.spelling(before), row, beam)
    class_names = run.class_names
    head_lp = head.log_probs(h[None, :].astype(np.float32))[0]
    gate = float(np.exp(log_gate(head_lp[None, :], class_names, lams)[0]))
    parts = {
        name: np.log(lams[name]) + head_lp[class_names.index(name)] + log_mm
        for name, log_mm in micro_at_end(run, prompt, h).items()
    }
    number = float(number_mass(head_lp[None, :], class_names)[0])
    root = site.root(run.function_weights, number) if site is not None else None
    weight = root.weight if root is not None else 0.0
    words: dict[str, Word] = {}
    for w, text_w in enumerate(local.strings):
        pieces = {}
        for name, table in parts.items():
            hit = np.flatnonzero(members.classes[name] == w)
            if len(hit):
                pieces[name] = float(np.exp(table[hit[0]]))
        p_t = float(np.exp(log_event[w]))
        fun = float(np.exp(root.log_fun[w])) if root is not None else 0.0
        if p_t > 0 or pieces or fun > 0:
            mixed = (1 - gate) * p_t + sum(pieces.values())  # a function's string: no V_c's
            words[text_w] = Word(
                text_w,
                p_t,
                mixed,
                w < len(members.strings),
                pieces,
                (1 - weight) * mixed + weight * fun,
                weight * fun,
            )
    _add_other_words(run, ids, row, local, before, words, gate, weight, tokens, bool(prompt))
    ranked = list(words.values())
    out: dict[str, Any] = {
        "transformer": sorted(ranked, key=lambda x: -x.transformer)[:k],
        "mixture": sorted(ranked, key=lambda x: -x.mixture)[:k],
        "gate": gate,
    }
    if run.functions is not None:
        out["functions"] = sorted(ranked, key=lambda x: -x.functions)[:k]
        out["function_weight"] = weight
        out["function_detail"] = site_detail(run, prompt) if site is not None else ""
    return out


def _add_other_words(run, ids, row, members, before, words, gate, weight, tokens, any_prompt):
    """The Transformer's likeliest next tokens that begin no member, each taken as a whole
    word, with the probability that the word ends after it (the next token neither extends
    it nor continues a member that begins with it)."""
    tok = run.bundle.checkpoint.tokenizer
    spelling = members.spelling(before)
    top_tokens = np.argsort(-row)[:tokens]
    candidates = [int(t) for t in top_tokens if not members.continuing[t] or not any_prompt]
    if not candidates:
        return
    after, _ = _forward(run.bundle.model, [[*ids, t] for t in candidates])
    for t, row_t in zip(candidates, after, strict=True):
        text_t = tok.decode([t]).strip()
        if not text_t or text_t in words:
            continue
        # " Los" + " Angeles" is the member Los Angeles, not the word "Los"
        extends = members.continuing.copy()
        longer = (spelling.tokens[:, 0] == t) & (spelling.lengths > 1)
        extends[spelling.tokens[longer, 1]] = True
        ends = _log1m(_lse(row_t[extends]))
        p_t = float(np.exp(row[t] + ends))
        keep = (1 - gate) * p_t
        words[text_t] = Word(text_t, p_t, keep, False, {}, (1 - weight) * keep, 0.0)


def site_detail(run: TransformerRun, prompt: str) -> str:
    """What the functions computed at the prompt's end, in words."""
    from nslm.data.text import EOS_TOKENS

    prepared = prepared_slot(run.corpus, prompt)
    strings = prepared.strings
    at = max(i for i, t in enumerate(strings) if t not in EOS_TOKENS)
    refs = run.functions.references(list(strings[: at + 1]), at)
    return "; ".join(f"{r.function}: {r.detail}" for r in refs)
