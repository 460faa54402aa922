"""Bits per byte of a scored text, in all and on the tokens of each class."""

from __future__ import annotations

import math

import numpy as np

from nslm.evaluation.open_tables import row_masks


def bits_per_byte(log_probs: np.ndarray, n_bytes: int) -> float:
    return float(-np.nansum(log_probs) / math.log(2) / n_bytes)


def class_bits_per_byte(log_probs: np.ndarray, text, class_names) -> dict:
    """Bits per byte on the tokens of each class (by rule), Numbers and Locations: their bits
    over the UTF-8 bytes of the tokens as written."""
    size = np.array([len(s.encode("utf-8", errors="surrogatepass")) for s in text.strings])
    masks = row_masks(text.split, class_names)

    def on(mask: np.ndarray) -> float | None:
        return bits_per_byte(log_probs[mask], int(size[mask].sum())) if mask.any() else None

    return {
        "bpb_numbers": on(masks["Numbers"]),
        "bpb_locations": on(masks["Locations"]),
        "classes": {n: on(masks[n]) for n in class_names[1:] if n in masks},
    }
