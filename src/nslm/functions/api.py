"""``nslm.check(text)``: the numbers of a text that disagree with what a function computes,
as the command ``nslm check`` prints them (docs/functions.md, "Checking a text")."""

from __future__ import annotations

from dataclasses import dataclass

from nslm.functions.check import Flag, check_documents
from nslm.functions.documents import text_documents
from nslm.functions.fitted import cached_model
from nslm.functions.model import FunctionModel


@dataclass(frozen=True)
class CheckResult:
    """The flags of a text, how many of its numbers a function computes (``checked``) and
    the threshold τ the flags passed."""

    flags: list[Flag]
    checked: int
    threshold: float

    def summary(self) -> str:
        numbers = "number" if self.checked == 1 else "numbers"
        return (
            f"{len(self.flags)} flagged of {self.checked} {numbers} a function computes "
            f"(threshold {self.threshold:.3g})"
        )

    def to_json(self) -> dict:
        return {
            "checked": self.checked,
            "flagged": len(self.flags),
            "threshold": self.threshold,
            "flags": [f.to_json() for f in self.flags],
        }


def check_text(
    text: str,
    *,
    threshold: float | None = None,
    input_format: str = "plain",
    model: FunctionModel | None = None,
) -> CheckResult:
    """Check ``text`` (plain English or WikiText's tokens; a form feed between documents)
    against the functions fitted on WikiText-2 (``model``: others); ``threshold``: τ, by
    default the one chosen on WikiText-2 valid."""
    model = cached_model() if model is None else model
    tau = model.check.get("threshold", 3.0) if threshold is None else threshold
    _, documents = text_documents(text, "wikitext", input_format, classes="none")
    flags, checked = check_documents(model, documents, tau)
    return CheckResult(flags, checked, tau)
