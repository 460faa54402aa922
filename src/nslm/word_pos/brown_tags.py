"""Brown Corpus tags → the 12 universal tags of Petrov, Das and McDonald (2012).

The universal tags: NOUN, VERB, ADJ, ADV, PRON, DET, ADP, NUM, CONJ, PRT, ``.`` (punctuation)
and X (other). The map is written here from the tag definitions of the Brown Corpus manual
(Francis and Kučera 1964/1979); every tag of the NLTK Brown corpus (472 of them) maps, and
any other tag raises :class:`~nslm.errors.NslmError`
(``tests/word_pos/test_tagged_data.py`` reads the whole corpus).

A Brown tag is a base tag with decorations, undone in this order:

1. three known misprints in the corpus (truncated tags) are read as what they stand for:
   ``fw-in+at-t`` (3 times, "Des") is ``fw-in+at-tl``, ``ppss+ber-n`` (once, "You're") is
   ``ppss+ber-nc`` and ``wdt+ber+pp`` (once, "whaddya") is ``wdt+ber+ppss``;
2. ``fw-…`` (a foreign word, with the tag its English equivalent would get) → X, whatever
   follows; what follows must still be a valid tag;
3. ``a+b`` (a contraction: ``pps+bez`` "it's", ``ppss+md`` "I'll", ``vb+ppo`` "gimme",
   ``to+vb`` "t'ain") takes the class of its first part; every part must be a valid tag;
4. in each part, the suffixes ``-tl`` (in a title), ``-hl`` (in a headline) and ``-nc``
   (cited word) are removed, in any number and order (``nns$-tl-hl``, ``---hl`` is ``--``);
5. ``*`` alone is the negator "not", "n't" → ADV; a trailing ``*`` (``bedz*`` "wasn't",
   ``do*`` "don't", ``md*`` "can't") is the negated form of the base, which keeps its class;
6. a trailing ``$`` (possessive: ``nn$``, ``np$``, ``pn$``, ``cd$``, ``jj$``) keeps the
   class of the tag without it, except the possessive pronouns ``pp$`` "my", ``pp$$``
   "mine" and ``wp$`` "whose", which are base tags of their own (PRON);
7. the base tag by the table :data:`BASE_TAGS`.

Choices in the table (the Brown manual's gloss in quotes):

- NOUN: ``nn nns np nps`` and the adverbial nouns ``nr nrs`` ("home", "today", "west");
- VERB: ``vb vbd vbg vbn vbz``, the forms of be (``be bed bedz beg bem ben ber bez``), have
  (``hv hvd hvg hvn hvz``) and do (``do dod doz``), and the modals ``md``;
- ADJ: ``jj jjr jjs jjt`` and the ordinals ``od`` ("first", "2nd"), as in the universal map;
- ADV: ``rb rbr rbt``, the nominal adverb ``rn`` ("here", "then"), the qualifiers ``ql``
  ("very"), ``qlp`` ("enough", "indeed") and ``wql`` ("how"), ``wrb`` ("when", "where")
  and the negator ``*``;
- PRON: the nominal pronoun ``pn`` ("everybody", "nothing"), ``pp$ pp$$ ppl ppls ppo pps
  ppss`` and the wh-pronouns ``wp$ wpo wps``;
- DET: ``at`` ("the", "a"), ``dt dti dts dtx`` ("this", "any", "these", "either"), the
  pre-quantifiers ``abn abx`` ("all", "half", "both"), the pre-qualifier ``abl`` (in the
  corpus "such" 310 times, "quite" 42, "rather" 5, before an article: "such a", "quite a",
  which the Penn Treebank tags PDT, a DET in the universal map of PTB tags), the
  post-determiner ``ap`` ("many", "next"), ``wdt`` ("which", "what") and the existential
  ``ex`` ("there");
- ADP: the prepositions ``in`` and the subordinating conjunctions ``cs`` ("that", "if");
- CONJ: ``cc``; NUM: ``cd``; PRT: the infinitive marker ``to`` and the particles ``rp``;
- ``.``: ``. , : ( ) -- ' ''`` and the opening quotes (two backquotes);
- X: the interjections ``uh`` (the 12 tags have no interjection) and ``nil`` (no tag
  assigned, 157 tokens, a few of them brackets or hyphens: they stay X, as tagged), besides
  the foreign words of rule 2.
"""

from __future__ import annotations

from functools import cache

from nslm.errors import NslmError

_CLASSES = {
    "NOUN": "nn nns np nps nr nrs",
    "VERB": "vb vbd vbg vbn vbz be bed bedz beg bem ben ber bez hv hvd hvg hvn hvz do dod doz md",
    "ADJ": "jj jjr jjs jjt od",
    "ADV": "rb rbr rbt rn ql qlp wql wrb *",
    "PRON": "pn pp$ pp$$ ppl ppls ppo pps ppss wp$ wpo wps",
    "DET": "at dt dti dts dtx abn abx abl ap wdt ex",
    "ADP": "in cs",
    "CONJ": "cc",
    "NUM": "cd",
    "PRT": "to rp",
    ".": ". , : ( ) -- ' '' ``",
    "X": "uh nil",
}
UNIVERSAL_TAGS = tuple(_CLASSES)  # the 12, in the order of Petrov et al.
BASE_TAGS: dict[str, str] = {
    base: universal for universal, bases in _CLASSES.items() for base in bases.split()
}
SUFFIXES = ("-tl", "-hl", "-nc")
MISPRINTS = {
    "fw-in+at-t": "fw-in+at-tl",
    "ppss+ber-n": "ppss+ber-nc",
    "wdt+ber+pp": "wdt+ber+ppss",
}
FOREIGN = "fw-"


def _strip_suffixes(part: str) -> str:
    while (suffix := next((s for s in SUFFIXES if part.endswith(s)), None)) and part != suffix:
        part = part[: -len(suffix)]
    return part


def _base_class(part: str, tag: str) -> str:
    base = _strip_suffixes(part)
    if base != "*" and base.endswith("*"):
        base = base[:-1]
    if base not in BASE_TAGS and base.endswith("$"):
        base = base[:-1]
    if base not in BASE_TAGS:
        raise NslmError(f"unknown Brown tag {tag!r} (no base tag {part!r})")
    return BASE_TAGS[base]


@cache
def universal_tag(tag: str) -> str:
    """The universal tag of the Brown tag ``tag`` (module docstring); NslmError if unknown."""
    rest = MISPRINTS.get(tag, tag)
    foreign = rest.startswith(FOREIGN)
    if foreign:
        rest = rest[len(FOREIGN) :]
    classes = [_base_class(part, tag) for part in rest.split("+")]
    return "X" if foreign else classes[0]
