"""A generated continuation as plain text, cut into one piece per token, so that the explorer
shows readable text and can still mark the class tokens inside it."""

from __future__ import annotations

from collections.abc import Sequence

from nslm.data.text import EOS_TOKENS, to_plain


def plain_pieces(
    prompt: Sequence[str], generated: Sequence[str], form: str
) -> tuple[str, list[str]]:
    """The prompt's and each generated token's piece of :func:`~nslm.data.text.to_plain` of
    them all: joined, the pieces are that text, so a page can mark a class token inside
    plain text. Each token's own plain form is found in order in the text (detokenizing moves
    spaces and joins ``@-@``, never reorders); one not found gets an empty piece and the
    text it would have covered goes to the next one found."""
    text = to_plain([*prompt, *generated], form)
    cursor = 0
    ends = []
    for token in [*prompt, *generated]:
        own = "\n" if token in EOS_TOKENS else to_plain([token], form).strip()
        at = text.find(own, cursor) if own else -1
        if at >= 0:
            cursor = at + len(own)
        ends.append(cursor)
    ends[-1:] = [len(text)] if ends else []  # whatever is left belongs to the last token
    starts = [0, *ends[:-1]][: len(ends)]
    pieces = [text[a:b] for a, b in zip(starts, ends, strict=True)]
    n = len(prompt)
    return "".join(pieces[:n]), pieces[n:]
