"""The pieces of a self-contained HTML page: escaped text, tables, inline figures, one style.

Everything a page needs is inside it (styles, a few lines of script to sort tables, figures
as base64 PNG), so a report opens offline and can be mailed as one file.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1100px;
       padding: 1em 2em 4em; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { margin-top: 1.5em; }
table { border-collapse: collapse; margin: 0.8em 0; font-variant-numeric: tabular-nums; }
th, td { padding: 0.25em 0.7em; border-bottom: 1px solid #e4e4e4; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f4f4f4; position: sticky; top: 0; }
table.sortable th { cursor: pointer; } table.sortable th:hover { background: #e8e8f4; }
tr.aggregate td { font-weight: 600; border-top: 1px solid #999; }
td.paper { color: #666; font-style: italic; }
.note { color: #555; font-size: 0.92em; } .muted { color: #888; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 0.9em; }
code { background: #f4f4f4; padding: 0 0.25em; border-radius: 3px; }
nav a { margin-right: 1em; }
"""

# Click a header to sort by that column (numbers numerically, the rest as text).
SORT_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, column) {
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.from(body.rows);
      var up = th.dataset.order !== "up"; th.dataset.order = up ? "up" : "down";
      function key(row) {
        var text = row.cells[column] ? row.cells[column].textContent : "";
        var n = parseFloat(text.replace(/[,()%]/g, ""));
        return isNaN(n) ? text : n;
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b), s = x < y ? -1 : x > y ? 1 : 0; return up ? s : -s;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def number(value: Any, digits: int = 1) -> str:
    """A figure as a table shows it: thousands separated, None/NaN as a dash."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return esc(value)
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    sortable: bool = True,
    classes: Sequence[str] | None = None,
    raw: bool = False,
) -> str:
    """An HTML table; cells are escaped unless ``raw`` (already HTML). ``classes`` gives a CSS
    class per row (e.g. "aggregate")."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        css = f' class="{classes[i]}"' if classes and classes[i] else ""
        cells = "".join(f"<td>{c if raw else esc(c)}</td>" for c in row)
        body.append(f"<tr{css}>{cells}</tr>")
    kind = ' class="sortable"' if sortable else ""
    return f"<table{kind}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def png_data(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def figure(source: Path | bytes, caption: str = "", alt: str = "") -> str:
    """An inline PNG figure from a file or from bytes."""
    data = source.read_bytes() if isinstance(source, Path) else source
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f'<figure><img alt="{esc(alt or caption)}" src="{png_data(data)}">{cap}</figure>'


def matplotlib_png(fig) -> bytes:
    """A matplotlib figure as PNG bytes (then closed)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


def page(title: str, sections: Sequence[tuple[str, str, str]], subtitle: str = "") -> str:
    """The whole document; ``sections`` are (anchor, heading, body HTML)."""
    nav = "".join(f'<a href="#{esc(a)}">{esc(h)}</a>' for a, h, _ in sections)
    parts = [f'<h2 id="{esc(a)}">{esc(h)}</h2>\n{body}' for a, h, body in sections]
    sub = f'<p class="note">{subtitle}</p>' if subtitle else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{esc(title)}</h1>{sub}<nav>{nav}</nav>\n"
        + "\n".join(parts)
        + f"<script>{SORT_SCRIPT}</script></body></html>\n"
    )
