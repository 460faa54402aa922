"""The Transformer with micro-models: a proper distribution over the next word, applied
token by token.

At a position r where a new word may start (a *root*), the class head gives
P(none | h_r) and P(c | h_r) (:mod:`nslm.transformer.class_head`), and each class's
micro-model P_MM(w | c, w_prev^(c)) spreads that class over its members (paper Eq. 1; the
plain micro-models of :mod:`nslm.micro.model`). With a weight λ_c ∈ [0, 1] per class,
fitted on valid, each member w gets the micro-model mass

    Q(w) = Σ_c λ_c · P(c | h_r) · P_MM(w | c, w_prev^(c)),    G = Σ_w Q(w) = Σ_c λ_c · P(c | h_r)

and every continuation x of the text from r gets

    P(x) = (1 − G) · P_T(x) + Q(w)·P_T(x | E_w)    if x ∈ E_w for a member w,
    P(x) = (1 − G) · P_T(x)                         otherwise,

where E_w is the event "the next tokens are τ(w) and the one after does not extend w"
(:mod:`nslm.transformer.candidates`). This is the NSLM's Eq. 4 mixed with the neural model,
as the paper's reported NSLM is (λ·P_NNLM + (1 − λ)·P_NSLM), except that the weight of the
symbolic part is λ_c·P(c | h) rather than a constant. The events are disjoint and
P_T(·) sums to one, so P sums to one: (1 − G) + G.

Token by token. Walking the text from r through the members' trie, let d be the depth
(tokens since r) and M(d) the mass of the continuations that start with the text's first d
tokens from r: M(d) = (1 − G) · P_T(x_r … x_{r+d−1}) + Σ_{w : τ(w) starts so} Q(w),
M(0) = 1. The next token's probability is

- M(d + 1) / M(d) while the text stays on the trie;
- (1 − G) · P_T(x_r … x_{r+d}) / M(d) when it leaves the trie (the event is "no member");
- at d = |τ(w)| for a member w, a token t that does not extend w ends the word:
  [(1 − G) · P_T(τ(w)) · P_T(end | τ(w)) + Q(w)] / M(d) · P_T(t | τ(w)) / P_T(end | τ(w)),
  P_T(end | ·) = 1 − P_T(F(w) | ·); the first factor is the word's "it ends here", which the
  per-class tables charge to the word, the second the token's own share given that.

After a word ends or the text leaves the trie, the next token is a new root. With λ = 0 the
same walk gives the Transformer's own probabilities exactly (with the same split of the
end-of-word token), so the two columns compare token for token. :func:`node_distribution`
gives the whole next-token distribution at any step (the sums-to-one check and ``predict``).

Functions (docs/functions.md). At a root where functions fire with weight W and P_fun over
the strings they compute, the root's members are the run's and those strings
(:meth:`Members.with_strings`: ``23.3`` is a member there whether or not any V_c holds it),
and

    Q'(w) = (1 − W) · Q(w) + W · P_fun(w),    1 − G' = (1 − W) · (1 − G)

so the mass is still (1 − G') + G' = 1 and the walk above is unchanged (:class:`FunctionRoot`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from nslm.micro.logspace import log1mexp
from nslm.transformer.candidates import Members, Spelling

PLAIN, MEMBER, NO_MEMBER, OPEN = 0, 1, 2, 3  # how a segment from a root ended


@dataclass
class Segment:
    """A walk from root ``root``: ``depth`` tokens on the trie, then the token at
    ``root + depth`` that ended it (``how``), the member ``member`` whose word it ended
    (MEMBER), ``match`` the per-member matched lengths (None for a PLAIN root)."""

    root: int
    depth: int
    how: int
    spelling: Spelling | None = None
    match: np.ndarray | None = None
    member: int = -1
    after: tuple[Spelling, int] | None = None  # the member whose word ended just before
    members: Members | None = None  # the root's own members (a function root); None: the run's

    def on_trie(self, d: int) -> np.ndarray:
        """The members whose τ starts with the text's first ``d`` tokens from the root."""
        cache = self.__dict__.setdefault("_on_trie", {})
        if d not in cache:
            cache[d] = np.flatnonzero(self.match >= d)
        return cache[d]


@dataclass
class FunctionRoot:
    """A root where functions fire: its members (the run's, then the functions' strings),
    the functions' weight W and log P_fun over those members (module docstring)."""

    members: Members
    weight: float
    log_fun: np.ndarray

    def log_q(self, log_q: np.ndarray) -> np.ndarray:
        """log Q' over the root's members from log Q over the run's."""
        out = np.full(len(self.members.strings), -np.inf)
        out[: len(log_q)] = log_q
        with np.errstate(divide="ignore"):
            return np.logaddexp(np.log1p(-self.weight) + out, np.log(self.weight) + self.log_fun)

    def log_keep(self, log_keep: float) -> float:
        """log(1 − G') from log(1 − G)."""
        with np.errstate(divide="ignore"):
            return float(log_keep + np.log1p(-self.weight))


def spellings(members: Members, ids: np.ndarray, offsets: np.ndarray, plain: str) -> list:
    """The spelling of members at each position: after the character before the token."""
    out = []
    for i in range(len(ids)):
        start = int(offsets[i][0])
        before = plain[start - 1] if start > 0 else None
        out.append(members.spelling(before))
    return out


def _ends_word(members: Members, spelling: Spelling, member: int, token: int) -> bool:
    """Whether ``token`` after τ(member) ends the word (it is not in F(member))."""
    if members.continuing[token]:
        return False
    return token not in spelling.children[member]


def walk(
    members: Members,
    ids: np.ndarray,
    offsets: np.ndarray,
    plain: str,
    functions: dict[int, FunctionRoot] | None = None,
) -> list[Segment]:
    """The text's segments (module docstring): fixed by its tokens and the members alone,
    a function root's own (``functions``: root position → :class:`FunctionRoot`) there."""
    n = len(ids)
    functions = functions or {}
    segments: list[Segment] = []
    r = 0
    after: tuple[Spelling, int] | None = None
    while r < n:
        local = functions[r].members if r in functions else None
        here = local if local is not None else members
        start = int(offsets[r][0])
        spelling = here.spelling(plain[start - 1] if start > 0 else None)
        if int(ids[r]) not in _firsts(spelling):
            if after is None:
                segments.append(Segment(r, 0, PLAIN, members=local))
            else:  # the root after a member's word: normalised over what may follow it
                none = np.zeros(len(here.strings), dtype=np.int64)
                segments.append(
                    Segment(r, 0, NO_MEMBER, spelling, none, after=after, members=local)
                )
            r, after = r + 1, None
            continue
        match = spelling.matches(ids[r : r + spelling.tokens.shape[1] + 1])
        complete = match == spelling.lengths
        d = 0
        while True:
            i = r + d
            if i >= n:
                segments.append(Segment(r, d, OPEN, spelling, match, after=after, members=local))
                r = n
                break
            done = np.flatnonzero(complete & (spelling.lengths == d)) if d else ()
            if len(done) and _ends_word(here, spelling, int(done[0]), int(ids[i])):
                w = int(done[0])
                segments.append(
                    Segment(r, d, MEMBER, spelling, match, w, after=after, members=local)
                )
                r, after = i, (spelling, w)  # the token after the word is a new root
                break
            if (match >= d + 1).any():
                d += 1
                continue
            segments.append(Segment(r, d, NO_MEMBER, spelling, match, after=after, members=local))
            r, after = i + 1, None
            break
    return segments


def _firsts(spelling: Spelling) -> set[int]:
    cache = spelling.__dict__.get("_firsts")
    if cache is None:
        cache = spelling.__dict__["_firsts"] = set(spelling.first.tolist())
    return cache


def follows(members: Members, after: tuple[Spelling, int] | None, spelling: Spelling) -> np.ndarray:
    """The members that may start right after ``after``'s word: their first token does not
    extend it (all of them when nothing came before)."""
    if after is None:
        return np.ones(len(members.strings), dtype=bool)
    f = members.continuing.copy()
    f[after[0].children[after[1]]] = True
    return ~f[spelling.tokens[:, 0]]


def log_end(members: Members, spelling: Spelling, member: int, set_log_probs: np.ndarray) -> float:
    """log P_T(the word ends | τ(member)) from a position's kept set masses: 1 − P_T(F)."""
    parts = [float(set_log_probs[0])]
    for token in spelling.children[member]:
        if not members.continuing[token]:
            column = 1 + int(np.searchsorted(members.extra, token))
            parts.append(float(set_log_probs[column]))
    return _log1m(logsumexp(parts))


def _lse(values: np.ndarray) -> float:
    if not len(values):
        return -np.inf
    top = values.max()
    if not np.isfinite(top):
        return float(top)
    return float(top + np.log(np.exp(values - top).sum()))


def _log1m(log_x: float) -> float:
    """log(1 − e^log_x) for log_x < 0."""
    return float(log1mexp(np.asarray(min(log_x, -1e-15))))


@dataclass
class Scored:
    """Per Transformer token: its log-probability and the part of it charged to the word
    before it (the "it ends here" factor at a word's end; 0 elsewhere)."""

    log_probs: np.ndarray
    end_part: np.ndarray


def score(
    segments: list[Segment],
    log_probs: np.ndarray,
    set_log_probs: np.ndarray,
    members: Members,
    log_gate: np.ndarray | None = None,
    member_log_q: Callable[[np.ndarray], np.ndarray] | None = None,
    functions: dict[int, FunctionRoot] | None = None,
    chunk: int = 512,
) -> Scored:
    """The mixture's per-token log-probabilities along the walk. ``log_gate[r]`` = log G at
    each position (None: G = 0, the Transformer alone); ``member_log_q(roots)`` → (B, W) log
    Q(w) at those roots; ``functions``: the function roots the walk was made with."""
    n = len(log_probs)
    functions = functions or {}
    out = np.array(log_probs, dtype=np.float64, copy=True)
    end_part = np.zeros(n, dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_keep = np.zeros(n) if log_gate is None else np.log1p(-np.exp(log_gate))
    for r, root in functions.items():
        if r < n:
            log_keep[r] = root.log_keep(log_keep[r])
    plain = [s.root for s in segments if s.how == PLAIN]
    out[plain] += log_keep[plain]
    walked = [s for s in segments if s.how != PLAIN]
    for a in range(0, len(walked), chunk):
        group = walked[a : a + chunk]
        roots = np.array([s.root for s in group], dtype=np.int64)
        q = member_log_q(roots) if member_log_q is not None else None
        tails, member_q = _tails(group, q if log_gate is not None else None, functions, members)
        for row, seg in enumerate(group):
            _score_segment(
                seg,
                tails[row],
                member_q[row],
                log_keep[seg.root],
                log_probs,
                set_log_probs,
                seg.members if seg.members is not None else members,
                out,
                end_part,
            )
    return Scored(out + end_part, end_part)


def _tails(
    group: list[Segment],
    q: np.ndarray | None,
    functions: dict[int, FunctionRoot],
    members: Members,
) -> tuple[np.ndarray, np.ndarray]:
    """tails[b, d] = log Σ_{w: τ(w) starts with the text's d tokens} Q(w) for each segment
    (at d = 0 over the members that may follow the word before; all of them after no
    member), and log Q of the member whose word each segment ended (−inf elsewhere); Q'
    at a function root. ``q``: (B, W) log Q at the roots (None: no micro-models)."""
    deepest = max(s.depth for s in group) + 1
    tails = np.full((len(group), deepest + 1), -np.inf)
    member_q = np.full(len(group), -np.inf)
    for row, seg in enumerate(group):
        here = seg.members if seg.members is not None else members
        if seg.root in functions:
            q_row = functions[seg.root].log_q(q[row] if q is not None else np.zeros(0))
        elif q is not None:
            q_row = q[row]
        else:
            continue
        if seg.after is not None:
            tails[row, 0] = _lse(q_row[follows(here, seg.after, seg.spelling)])
        for d in range(1, seg.depth + 1):
            tails[row, d] = _lse(q_row[seg.on_trie(d)])
        if seg.how == MEMBER:
            member_q[row] = q_row[seg.member]
    return tails, member_q


def _score_segment(
    seg, tails, member_q, log_keep, log_probs, set_log_probs, members, out, end_part
) -> None:
    r = seg.root
    prefix = np.concatenate([[0.0], np.cumsum(log_probs[r : r + seg.depth + 1])])
    masses = np.logaddexp(log_keep + prefix[: seg.depth + 1], tails[: seg.depth + 1])
    masses[0] = 0.0
    if seg.after is not None:  # Z: what may follow the word before, of this root's mass
        term = log_end(members, seg.after[0], seg.after[1], set_log_probs[r])
        masses[0] = np.logaddexp(log_keep + term, tails[0])
    out[r : r + seg.depth] = masses[1:] - masses[:-1]  # the tokens on the trie
    i = r + seg.depth
    if seg.how == OPEN:
        return
    if seg.how == NO_MEMBER:
        out[i] = log_keep + prefix[seg.depth + 1] - masses[seg.depth]
        return
    term = log_end(members, seg.spelling, seg.member, set_log_probs[i])
    word = np.logaddexp(log_keep + prefix[seg.depth] + term, member_q) - masses[seg.depth]
    end_part[i] = word  # the token at i is the next root's first token


def node_distribution(
    row: np.ndarray,
    members: Members,
    spelling: Spelling,
    match: np.ndarray,
    depth: int,
    prefix_log_prob: float,
    log_keep: float,
    log_q: np.ndarray,
    after: tuple[Spelling, int] | None = None,
    following: np.ndarray | None = None,
) -> np.ndarray:
    """log P(next token) over the vocabulary at ``depth`` tokens into a walk, from the
    Transformer's full log-distribution ``row`` there (module docstring, token by token).
    ``match``: the members' matched lengths of the text so far from the root (only
    ``match >= depth`` is read: the members still on the trie); ``after``: the member whose
    word ended right before the root (its extending tokens cannot come first). Where a
    member's word may end here, ``following`` is the next root's distribution (this
    function at depth 0 with ``after`` = that member), which the tokens that end the word
    take; without it they take the Transformer's P_T(t) / P_T(end)."""
    out = log_keep + prefix_log_prob + row  # leaving the trie: "no member"
    if after is not None and depth == 0:
        log_q = np.where(follows(members, after, spelling), log_q, -np.inf)

    def log_mass(inside: np.ndarray, extra: float) -> float:
        tail = logsumexp(log_q[inside]) if inside.any() else -np.inf
        return float(np.logaddexp(log_keep + prefix_log_prob + extra, tail))

    here = match >= depth
    total = log_mass(here, 0.0) if depth else 0.0
    barred = None
    if after is not None and depth == 0:  # renormalised over what may follow that word
        barred = members.continuing.copy()
        barred[after[0].children[after[1]]] = True
        total = float(np.logaddexp(log_keep + _log1m(_lse(row[barred])), _lse(log_q)))
    longer = here & (spelling.lengths > depth)
    for token in np.unique(spelling.tokens[longer, depth]) if longer.any() else ():
        below = longer & (spelling.tokens[:, depth] == token)
        out[token] = log_mass(below, row[token])
    done = np.flatnonzero(here & (spelling.lengths == depth)) if depth else ()
    if len(done):
        w = int(done[0])
        f = members.continuing.copy()
        f[spelling.children[w]] = True
        term = _log1m(logsumexp(row[f]))
        word = np.logaddexp(log_keep + prefix_log_prob + term, log_q[w])
        out[~f] = word + (following[~f] if following is not None else row[~f] - term)
    if barred is not None:
        out[barred] = -np.inf
    return out - total
