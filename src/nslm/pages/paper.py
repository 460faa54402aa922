"""The paper's WikiText-2 figures (Demeter & Downey, Tables 2 and 3), shown beside a run's own.

Per class: the paper's selected metric and PDF, and the perplexity of each of its models.
"""

from __future__ import annotations

PAPER_MODELS = ("NNLM", "HNLM", "CRNN", "NSLM")

# Table 2 (numbers) and Table 3 (places), WikiText-2 columns
PAPER_WT2: dict[str, dict[str, dict]] = {
    "numbers": {
        "year": {"metric": "diff", "pdf": "MoG", "ppl": (486.3, 452.8, 396.3, 247.3)},
        "day": {"metric": "freq", "pdf": "unigram", "ppl": (76.2, 78.5, 72.6, 70.8)},
        "round": {"metric": "value", "pdf": "multinomial", "ppl": (850.0, 866.5, 806.8, 781.7)},
        "decimal": {"metric": "diff", "pdf": "MoG", "ppl": (10476.4, 7524.4, 6715.5, 6998.0)},
        "range": {"metric": "diff", "pdf": "multinomial", "ppl": (185.5, 206.7, 76.5, 89.3)},
        "convert": {"metric": "convert", "pdf": "binary", "ppl": (351.9, 303.7, 93.3, 33.3)},
        "other": {"metric": "value", "pdf": "multinomial", "ppl": (2819.9, 2785.0, 1659.7, 1778.6)},
        "Numbers": {"ppl": (790.2, 765.5, 559.3, 475.5)},
        "Global": {"ppl": (92.0, 90.9, 90.2, 89.8)},
    },
    "places": {
        "city": {
            "metric": "euclidean",
            "pdf": "gaussian",
            "ppl": (24870.5, 19853.3, 26493.1, 2400.4),
        },
        "state": {
            "metric": "euclidean",
            "pdf": "gaussian",
            "ppl": (3137.1, 2726.5, 2978.8, 1967.2),
        },
        "country": {
            "metric": "euclidean",
            "pdf": "gaussian",
            "ppl": (3361.3, 3060.2, 3330.8, 1498.6),
        },
        "Locations": {"ppl": (4812.1, 3911.1, 4500.0, 1801.1)},
        "Global": {"ppl": (91.0, 91.2, 91.3, 90.5)},
    },
}


def paper_row(table: str, row: str) -> dict | None:
    """The paper's figures for one row of a table, or None (a class the paper does not have)."""
    return PAPER_WT2.get(table, {}).get(row)
