"""``nslm predict``'s text: a prediction of :func:`nslm.generation.predict.predict` in 80
columns."""

from __future__ import annotations

from typing import Any

# A reading below this share of its token's probability is left out of the printed breakdown
# (every year is also a possible <range>, at a tiny probability: that line helps nobody).
SHOWN_SHARE = 0.01
WIDTH = 80
# Control characters of the input (an ESC, a DEL, C1 codes) would drive the terminal they are
# printed to: shown as escapes instead, as `ls` shows odd file names. Line breaks and tabs stay.
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(32), *range(0x7F, 0xA0)] if chr(c) not in "\n\t"}


def printable(text: str) -> str:
    """``text`` safe to print to a terminal: control characters as ``\\xNN``."""
    return text.translate(_CONTROLS)


def render(result: dict[str, Any]) -> str:
    """The prediction as text in 80 columns: two top-k lists, then P(class) × P_MM per class."""
    lines = [f"prompt: {result['prompt']}", f"read as: {' '.join(result['tokens'])}"]
    if result.get("oov"):
        lines.append(f"not in the vocabulary, read as <unk>: {', '.join(result['oov'])}")
    lam = result["lambda"]
    mix = "Eq. 4 alone" if lam == 0 else f"{lam:.2f}·NNLM + {1 - lam:.2f}·Eq. 4 (Global λ)"
    lines += ["", f"{'NNLM':<22}  NSLM = {mix}"]
    for i, item in enumerate(result["nslm"]):
        left = result["nnlm"][i] if i < len(result["nnlm"]) else None
        ltxt = f"{left['token'][:14]:<14} {left['p']:.4f}" if left else ""
        shown = [p for p in item["breakdown"] if p["p"] >= SHOWN_SHARE * item["p"]]
        why = "; ".join(_part(p) for p in shown[:1])
        line = f"{ltxt:<22}  {item['token'][:14]:<14} {item['p']:.4f}  {why}"
        lines.append(line[:WIDTH])
    lines += ["", "P(class | h), its micro-model [metric+PDF, previous class token], best 3:"]
    for d in result["classes"]:
        if d["model"] == "neural":
            how = "neural"  # the model's within-class softmax (Eq. 3): no micro-model context
        else:
            prev = f"prev {d['context']}" if d["context"] else "no prev: unigram"
            how = f"{d['model']}, {prev}"
        lines.append(f"  {d['class']:<10} {d['p_class']:.4f}  [{how}]"[:WIDTH])
        best = "  ".join(f"{t['token'][:16]} {t['p_in_class']:.3f}" for t in d["top"])
        lines.append(f"      {best}"[:WIDTH])
        if d.get("gate"):  # a context-aware micro-model: the components the context chose
            gate = "  ".join(f"{g['component']} {g['weight']:.2f}" for g in d["gate"][:3])
            lines.append(f"      gate: {gate}"[:WIDTH])
        if d.get("shift"):  # a shifted one: the metric bins the context favoured
            shift = "  ".join(f"{g['bin']} ×{g['factor']:.2f}" for g in d["shift"][:2])
            lines.append(f"      shift: {shift}"[:WIDTH])
        if d.get("value_shift"):  # and the value bins (an era or a magnitude) it favoured
            shift = "  ".join(f"{g['bin']} ×{g['factor']:.2f}" for g in d["value_shift"][:2])
            lines.append(f"      value: {shift}"[:WIDTH])
    return printable("\n".join(lines))


def _part(p: dict[str, Any]) -> str:
    if p["as"] == "word":
        return "as a word"
    return f"= {p['as']} {p['p_class']:.3f} × {p['p_in_class']:.3f}"
