"""The texts several benchmarks score, from where the project keeps its data."""

from __future__ import annotations

import os
from pathlib import Path

from nslm.data.conllu import conllu_text
from nslm.data.textfile import read_text

ROOT = Path(__file__).resolve().parents[2]
# $NSLM_DATA_DIR, else the data folder beside the checkout (as CI's and the Makefile's)
DATA = Path(os.environ.get("NSLM_DATA_DIR", ROOT.parent / "shared" / "data"))


def ewt_text() -> str:
    """UD English EWT test's ``# text =`` lines, one sentence a line, a form feed between its
    316 documents (``# newdoc``): plain text, scored document by document."""
    path = DATA / "ud-english-ewt" / "test.conllu.xz"
    return conllu_text(read_text(path), str(path))
