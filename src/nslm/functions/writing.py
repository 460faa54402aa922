"""How a computed number is written: significant figures and the corpus's number format.

Wikipedia's ``{{convert}}`` template rounds a conversion's output to a precision that
follows the input's ("1,200 km (750 mi)", "15 kilometres (9.3 mi)", "14.5 miles (23.3 km)"):
:func:`template_decimals` is its default rule. Editors also give a precision of their own,
so the function offers the output at the rule's precision and at the input's number of
significant figures and a few either side, and the function model learns from training
text how often each is the one written.
"""

from __future__ import annotations

import math

from nslm.data.numbers import is_number, number_value

SIGNIFICANT_OFFSETS = (-2, -1, 0, 1, 2, 3, 4)


def significant_figures(token: str) -> int:
    """The significant figures a written number states: ``120`` → 2 (an integer's trailing
    zeros are read as placeholders, as Wikipedia's convert template reads them),
    ``14.5`` → 3, ``0.91`` → 2, ``1,200`` → 2, ``50`` → 1, ``100.0`` → 4."""
    digits = token.replace(",", "")
    if "." in digits:
        whole, fraction = digits.split(".", 1)
        stripped = (whole + fraction).lstrip("0")
        return max(1, len(stripped))
    return max(1, len(digits.lstrip("0").rstrip("0")))


def template_decimals(
    input_text: str, in_value: float, out_value: float, kelvin: float | None = None
) -> int:
    """The decimals (negative: tens, hundreds, …) the ``{{convert}}`` template rounds an
    output to when the editor gives no precision (Module:Convert's default precision): the
    input's decimals (an integer's trailing zeros count below zero: ``1,200`` → −2), plus
    log10(|in / out|) + log10 2, floored; but at least two significant figures in the
    output. A temperature (``kelvin``: the input in kelvin) keeps three significant figures
    in kelvin instead."""
    digits = input_text.replace(",", "").lstrip("-−")
    if "." in digits:
        places = len(digits.split(".", 1)[1])
    else:
        places = -(len(digits) - len(digits.rstrip("0")))
    out = abs(out_value)
    if out == 0 or in_value == 0 or not math.isfinite(out):
        return 0
    if kelvin is not None:
        adjust = 0.0
        least = 2 - math.floor(math.log10(kelvin) + 1e-14) if kelvin >= 1e-8 else 2
    else:
        adjust = math.log10(abs(in_value / out_value)) + math.log10(2)
        least = 1 - math.floor(math.log10(out) + 1e-14)
    return max(math.floor(places + adjust), least)


def written(value: float, decimals: int = 0) -> str:
    """``value`` as the corpus writes a number: rounded to ``decimals`` places (a negative
    count rounds to tens, hundreds, …), thousands grouped with commas (WikiText's
    ``1 @,@ 200``, joined again as ``1,200``)."""
    if decimals > 0:
        return f"{value:,.{decimals}f}"
    return f"{round(value, decimals):,.0f}"


def at_significant(value: float, figures: int, half: bool = False) -> str | None:
    """``value`` written with ``figures`` significant figures (``half``: to the nearest 5 at
    the next place, as 64.4 → 65: how storm articles write km/h), or None where it cannot be
    (not finite, not positive, or under the place the figures reach)."""
    if not math.isfinite(value) or value <= 0 or figures < 1:
        return None
    decimals = figures - 1 - math.floor(math.log10(value))
    if half:
        step = 5 * 10.0 ** -(decimals + 1)
        halves = round(value / step)
        if halves % 2 == 0:  # on the coarser place's grid: the option without ``half``
            return None
        value = halves * step
        decimals += 1
    text = written(value, decimals)
    return text if is_number(text) and number_value(text) > 0 else None


def significant_options(
    value: float, input_figures: int, prefix: str = ""
) -> list[tuple[str, str]]:
    """(key, text) for ``value`` at the input's significant figures and each offset of
    :data:`SIGNIFICANT_OFFSETS` (keys ``+0``, ``-1``, …, after ``prefix``), and at each
    offset to the nearest 5 of the next place (keys ``+0h``, …)."""
    out = []
    for offset in SIGNIFICANT_OFFSETS:
        for half in (False, True):
            text = at_significant(value, input_figures + offset, half)
            if text is not None:
                out.append((f"{prefix}{offset:+d}{'h' if half else ''}", text))
    return out
