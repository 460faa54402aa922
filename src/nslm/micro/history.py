"""A class token's history: w_{t-1}^{(c)} of paper Eq. 1, the previous class token a micro-model
conditions on, found per position.

Paper Eq. 1 conditions P_MM on "the most recent occurrence of a class token preceding w_t".
That leaves two readings of "class"; both are supported here (docs/micro-models.md, "Metrics"):

- ``"class"``: the previous token of the same class (the paper's reading);
- ``"family"``: the previous token of any class of the same family (any number, any place).

The search never crosses an article boundary (docs/data.md, "Lines, tokens, articles"). It
runs over the *rule* classes, so a valid/test number that fell outside the vocabulary still
serves as context: its value and coordinates are in the text the model has already read,
even though the LM sees ``<unk>``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nslm.data.corpus import Split

CONTEXT_MODES: tuple[str, ...] = ("class", "family")


def previous_index(context_mask: np.ndarray, article_ids: np.ndarray) -> np.ndarray:
    """For every position t, the largest s < t with ``context_mask[s]`` in t's article, else -1.

    One cumulative maximum over the marked positions, shifted by one; no Python loop.
    """
    n = len(context_mask)
    marked = np.where(context_mask, np.arange(n, dtype=np.int64), -1)
    latest_up_to = np.maximum.accumulate(marked) if n else marked
    prev = np.empty(n, dtype=np.int64)
    if n:
        prev[0] = -1
        prev[1:] = latest_up_to[:-1]
    found = prev >= 0
    same_article = np.zeros(n, dtype=bool)
    same_article[found] = article_ids[prev[found]] == article_ids[found]
    prev[~same_article] = -1
    return prev


@dataclass
class Context:
    """What each scored position knows about its context, one row per position.

    ``prev_ids`` is the vocabulary id of w_prev (the unk id for an OOV one, -1 if none), so a
    plug-in metric can look up its own per-type attributes; ``convert_target`` holds the
    preceding quantity in each unit training converts its unit to, at ``<convert>`` positions
    only (the unit written after the token is never read).
    """

    prev_index: np.ndarray  # (B,) int64, -1 if none
    prev_ids: np.ndarray  # (B,) int64, -1 if none
    prev_value: np.ndarray  # (B,) float64, NaN if none
    prev_coords: np.ndarray  # (B, 2) float64, NaN if none
    convert_target: np.ndarray  # (B, U) float64: the quantity in U plausible units; NaN if none
    # (B,) float64: the previous quantity of the article, a number of any class but a year or
    # a day (a count, a price, a measure), NaN if none; the open value models' second
    # reference (micro/open_values.py), so "12,480 … rising to" can read 12,480 at a <round>
    quantity_value: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.quantity_value is None:
            self.quantity_value = np.full(len(self.prev_index), np.nan)

    def __len__(self) -> int:
        return len(self.prev_index)

    def rows(self, index: np.ndarray | slice) -> Context:
        return Context(
            prev_index=self.prev_index[index],
            prev_ids=self.prev_ids[index],
            prev_value=self.prev_value[index],
            prev_coords=self.prev_coords[index],
            convert_target=self.convert_target[index],
            quantity_value=self.quantity_value[index],
        )

    def unique(self) -> tuple[Context, np.ndarray]:
        """The distinct contexts and, per row, which one it is: (U rows, inverse (B,)).

        A micro-model's distribution over V_c depends on the context's content only (the
        previous token's id, value, coordinates, conversion targets and previous quantity),
        and years, cities
        and countries recur, so scoring the U distinct contexts instead of all B rows saves
        most of the work. ``prev_index`` (a position) is left out of the key; the first row
        of each group keeps its own. Rows compare by their bytes, so NaN matches NaN.
        """
        if len(self) == 0:
            return self, np.zeros(0, dtype=np.int64)
        key = np.column_stack(
            [
                self.prev_ids.astype(np.float64),
                self.prev_value,
                self.prev_coords.reshape(len(self), -1),
                self.convert_target.reshape(len(self), -1),
                self.quantity_value,
            ]
        )
        key = np.ascontiguousarray(key)
        rows = key.view(np.dtype((np.void, key.dtype.itemsize * key.shape[1]))).ravel()
        _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
        return self.rows(first), inverse.reshape(-1)

    def as_column(self) -> Context:
        """Shapes (B, 1) so that metric expressions broadcast against (1, K) candidates."""
        return Context(
            prev_index=self.prev_index[:, None],
            prev_ids=self.prev_ids[:, None],
            prev_value=self.prev_value[:, None],
            prev_coords=self.prev_coords[:, None, :],
            convert_target=self.convert_target[:, None],
            quantity_value=self.quantity_value[:, None],
        )

    @classmethod
    def at(
        cls,
        split: Split,
        positions: np.ndarray,
        prev: np.ndarray,
        quantity_prev: np.ndarray | None = None,
    ) -> Context:
        """The context of ``positions`` given the previous-token index array of the split
        (and, for a number class, that of the quantities: :func:`previous_index`)."""
        p = prev[positions]
        has = p >= 0
        safe = np.where(has, p, 0)
        prev_value = np.where(has, split.values[safe], np.nan)
        prev_coords = np.where(has[:, None], split.coords[safe], np.nan)
        quantity = None
        if quantity_prev is not None:
            q = quantity_prev[positions]
            quantity = np.where(q >= 0, split.values[np.maximum(q, 0)], np.nan)
        return cls(
            prev_index=p,
            prev_ids=np.where(has, split.token_ids[safe].astype(np.int64), -1),
            prev_value=prev_value,
            prev_coords=prev_coords,
            convert_target=split.convert_targets[positions].astype(np.float64),
            quantity_value=quantity,
        )

    @classmethod
    def from_values(
        cls,
        prev_value: np.ndarray | None = None,
        prev_coords: np.ndarray | None = None,
        convert_target: np.ndarray | None = None,
        prev_ids: np.ndarray | None = None,
        quantity_value: np.ndarray | None = None,
    ) -> Context:
        """A context built by hand (tests, ``nslm predict``): missing fields become NaN/-1."""
        given = (prev_value, prev_coords, convert_target, prev_ids, quantity_value)
        sizes = [len(a) for a in given if a is not None]
        n = sizes[0] if sizes else 0

        def floats(a: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray:
            return np.full(shape, np.nan) if a is None else np.asarray(a, dtype=np.float64)

        ids = np.full(n, -1, np.int64) if prev_ids is None else np.asarray(prev_ids, np.int64)
        return cls(
            prev_index=np.where(ids >= 0, 0, -1).astype(np.int64),
            prev_ids=ids,
            prev_value=floats(prev_value, (n,)),
            prev_coords=floats(prev_coords, (n, 2)).reshape(n, 2),
            convert_target=floats(convert_target, (n,)).reshape(n, -1),
            quantity_value=floats(quantity_value, (n,)),
        )
