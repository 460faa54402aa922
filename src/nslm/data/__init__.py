"""Corpora: find them, prepare them with number and place classes, and hand out arrays.

The data flow starts here: raw corpus → :func:`prepare_corpus` → :class:`PreparedCorpus`.
"""

from nslm.data.corpus import PreparedCorpus, Split
from nslm.data.locate import locate_corpus
from nslm.data.numbers import NUMBER_CLASSES
from nslm.data.places import PLACE_CLASSES
from nslm.data.prepare import prepare_corpus
from nslm.data.vocab import EOS, UNK, Vocabulary

__all__ = [
    "EOS",
    "NUMBER_CLASSES",
    "PLACE_CLASSES",
    "UNK",
    "PreparedCorpus",
    "Split",
    "Vocabulary",
    "locate_corpus",
    "prepare_corpus",
]
