"""CoNLL-U files (Universal Dependencies) as plain text: each sentence's ``# text =`` line,
one line a sentence, and a form feed (:data:`~nslm.data.text.DOCUMENT_BREAK`) where a
``# newdoc`` comment starts another document, so that a treebank is scored document by
document (UD English EWT test: 316 documents)."""

from __future__ import annotations

from nslm.data.text import DOCUMENT_BREAK
from nslm.errors import NslmError

CONLLU_SUFFIXES = (".conllu", ".conllu.xz")


def is_conllu(name: str) -> bool:
    return name.endswith(CONLLU_SUFFIXES)


def conllu_documents(text: str, source: str = "CoNLL-U") -> list[list[str]]:
    """The sentences' ``# text =`` lines, grouped by document (a ``# newdoc`` line starts
    one; a file without any is one document). A sentence without a ``# text =`` line is a
    one-line error: its words alone do not say where the spaces were."""
    documents: list[list[str]] = [[]]
    for number, block in enumerate(text.split("\n\n"), start=1):
        lines = [line for line in block.split("\n") if line.strip()]
        if any(line.startswith("# newdoc") for line in lines) and documents[-1]:
            documents.append([])
        if all(line.startswith("#") for line in lines):
            continue  # comments alone (a file's head or tail): no sentence
        said = [line for line in lines if line.startswith("# text =")]
        if not said:
            raise NslmError(f"{source}: sentence {number} has no '# text =' line")
        documents[-1].append(said[0].removeprefix("# text =").strip())
    documents = [d for d in documents if d]
    if not documents:
        raise NslmError(f"{source}: no sentences (not a CoNLL-U file?)")
    return documents


def conllu_text(text: str, source: str = "CoNLL-U") -> str:
    """A CoNLL-U file's text: sentences one a line, documents separated by a form feed."""
    documents = conllu_documents(text, source)
    return DOCUMENT_BREAK.join("\n".join(d) + "\n" for d in documents)
