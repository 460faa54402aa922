"""Prompts where the context decides how a class's probability should spread, and what the
plain and the context-aware NSLM make of them (``nslm predict`` on both, side by side).

Each prompt names the class a reader expects next and what they expect of it: a year after
(or before) one the prompt gives, or a place other than those just listed. The figures are
read from the within-class distribution P(w | c) of each model at the prompt:

* ``after_mass`` / ``before_mass``: P(w | c) summed over members whose value is above /
  below the reference value (the William example first: its death year is after 1066);
* ``repeat_mass``: P(w | c) on the places the prompt already named.
"""

from __future__ import annotations

from typing import Any

from nslm.generation.predict import DEFAULT_PROMPT, predict

# (prompt, class, what a reader expects, check): check is ("after"|"before", value) or
# ("other", [places named]) or None
PROMPTS: list[tuple[str, str, str, tuple | None]] = [
    (DEFAULT_PROMPT, "year", "a year after 1066 (he died in 1087)", ("after", 1066)),
    ("The war began in 1939 and lasted until", "year", "a year after 1939 (1945)", ("after", 1939)),
    (
        "Construction of the church started in 1887 and was completed in",
        "year",
        "a year after 1887",
        ("after", 1887),
    ),
    (
        "The hall was opened in 1923 , although its design dated from",
        "year",
        "a year before 1923",
        ("before", 1923),
    ),
    (
        "He retired in 1998 , having joined the club in",
        "year",
        "a year before 1998",
        ("before", 1998),
    ),
    (
        "The band toured London , Manchester and",
        "city",
        "another British city, not London or Manchester",
        ("other", ["London", "Manchester"]),
    ),
    (
        "The storm moved from Texas into Louisiana and",
        "state",
        "a neighbouring state, not Texas or Louisiana",
        ("other", ["Texas", "Louisiana"]),
    ),
    (
        "The river flows through Germany , Austria and",
        "country",
        "a neighbour on the river, not Germany or Austria",
        ("other", ["Germany", "Austria"]),
    ),
    ("The tower is 100 metres (", "convert", "about 330 (feet)", None),
]

TOP = 5


def class_block(result: dict[str, Any], cls: str) -> dict[str, Any] | None:
    for block in result["classes"]:
        if block["class"] == f"<{cls}>":
            return block
    return None


def measure(block: dict[str, Any] | None, check: tuple | None) -> dict[str, Any]:
    """The top members of a class block and the check's masses."""
    if block is None:
        return {"top": [], "model": None}
    out: dict[str, Any] = {
        "model": block["model"],
        "p_class": block["p_class"],
        "top": [{"token": t["token"], "p": round(t["p_in_class"], 4)} for t in block["top"][:TOP]],
    }
    if block.get("gate"):
        out["gate"] = block["gate"][:3]
    if check is None:
        return out
    kind, ref = check
    members = block["top"]
    if kind in ("after", "before"):
        values = [(t.get("value"), t["p_in_class"]) for t in members]
        out["after_mass"] = sum(p for v, p in values if v is not None and v > ref)
        out["before_mass"] = sum(p for v, p in values if v is not None and v < ref)
    else:
        out["repeat_mass"] = sum(t["p_in_class"] for t in members if t["token"] in ref)
    return out


def prompt_results(loaded, plain: dict[str, Any], context: dict[str, Any]) -> list[dict]:
    """Every prompt under both models: {prompt, expected, class, plain, context, plain_top,
    context_top}; the first also {after_mass, before_mass}: {plain, context}."""
    rows = []
    for prompt, cls, expected, check in PROMPTS:
        row: dict[str, Any] = {"prompt": prompt, "class": f"<{cls}>", "expected": expected}
        for name, micro in (("plain", plain), ("context", context)):
            size = len(micro[cls].cls.candidates) if cls in micro else TOP
            block = class_block(predict(loaded, micro, prompt, n_within=size), cls)
            row[name] = measure(block, check)
            row[f"{name}_top"] = row[name]["top"]
        rows.append(row)
    first = rows[0]  # the William example: its masses at the top level, plain and context
    for key in ("after_mass", "before_mass"):
        first[key] = {name: first[name].get(key) for name in ("plain", "context")}
    return rows
