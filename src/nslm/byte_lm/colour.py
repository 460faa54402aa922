"""Text coloured by one neuron: each byte's tanh(cell state), in a terminal or in HTML.

As Carvalho's project (docs/byte-lm.md) shows its sentiment neuron, every byte gets the hyperbolic
tangent of one cell-state dimension after reading it, a value in [−1, 1]: +1 is red, −1
blue, 0 white. A character of several UTF-8 bytes is shown once, in the colour of its last
byte (the state once the whole character is read); a byte that is not valid UTF-8 is shown
as U+FFFD in its own colour.
"""

from __future__ import annotations

import html

import numpy as np

from nslm.errors import NslmError

RESET = "\x1b[0m"


def neuron_values(cells: np.ndarray, neuron: int) -> np.ndarray:
    """tanh of cell-state dimension ``neuron`` at every byte: (n_bytes,) in [−1, 1]."""
    if not 0 <= neuron < cells.shape[1]:
        raise NslmError(f"neuron {neuron} is out of range: the model has {cells.shape[1]} units")
    return np.tanh(cells[:, neuron].astype(np.float64))


def characters(data: bytes) -> list[tuple[str, int]]:
    """The text's characters, each with the index of its last byte (invalid bytes: U+FFFD)."""
    out: list[tuple[str, int]] = []
    i = 0
    while i < len(data):
        lead = data[i]
        width = 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        try:
            char = data[i : i + width].decode("utf-8")
        except UnicodeDecodeError:
            char, width = "\ufffd", 1
        out.append((char, i + width - 1))
        i += width
    return out


def rgb(value: float) -> tuple[int, int, int]:
    """White at 0, towards red at +1 and blue at −1."""
    v = float(np.clip(value, -1.0, 1.0))
    fade = round(255 * (1 - abs(v)))
    return (255, fade, fade) if v >= 0 else (fade, fade, 255)


def ansi(data: bytes, values: np.ndarray) -> str:
    """The text for a 24-bit-colour terminal: black on each character's colour."""
    _check(data, values)
    parts = []
    for char, last in characters(data):
        if char == "\n":  # a coloured newline paints the rest of the line
            parts.append("\n")
            continue
        r, g, b = rgb(values[last])
        parts.append(f"\x1b[38;2;0;0;0;48;2;{r};{g};{b}m{char}{RESET}")
    return "".join(parts)


def html_page(data: bytes, values: np.ndarray, *, title: str) -> str:
    """A self-contained HTML page of the coloured text; hovering shows each byte's value."""
    _check(data, values)
    spans = []
    for char, last in characters(data):
        if char == "\n":
            spans.append("<br>\n")
            continue
        r, g, b = rgb(values[last])
        spans.append(
            f'<span style="background:rgb({r},{g},{b})" title="{values[last]:+.3f}">'
            f"{html.escape(char)}</span>"
        )
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title></head>\n"
        "<body style='font-family:monospace;white-space:pre-wrap;max-width:80ch'>\n"
        f"<p>{html.escape(title)} (tanh of the cell state: +1 red, −1 blue)</p>\n"
        f"<p>{''.join(spans)}</p>\n</body></html>\n"
    )


def _check(data: bytes, values: np.ndarray) -> None:
    if len(values) != len(data):
        raise ValueError(f"{len(values)} values for {len(data)} bytes")
