"""The battery's text cases: text a person might type or paste, through every path that reads
text (``predict``, ``generate`` and ``eval --text`` in both input formats, and the explorer's
predict and generate API).

Each case is (path, text). Whatever the text, the path gives sane output (exit 0 with tokens
that are non-empty and hold no whitespace, finite probabilities, a continuation, finite
perplexities; the API a 200 whose text is its pieces joined) or one clean error (exit 2 with
one ``error:`` line; the API a 4xx whose detail is one line of text), never a traceback or a
500. Where the outcome is known (an empty prompt is an error, a Chinese sentence is read), the
case says which. The paths need a WikiText-form run with micro-models (the session's tiny
run in the tests; any run in benchmarks/text/text_bad_input.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from robustness.runner import Outcome, error_problems, ok_problems, run_in_process

# the 5 MB single line for eval --text (the benchmark); the tests send 1 MB, which
# takes the same code paths (as robustness.inputs.SMALL_BIG_LINE)
BIG_LINE_BYTES = 5 * 2**20
TEST_BIG_LINE_BYTES = 2**20
_SENTENCE = "The war began in 1914, and ended in 1918 (4 years) at a cost of $8,600.5 million. "

# name → text. "\udcff" is how Python reads an undecodable byte (0xFF) of a command line or a
# file, and what JSON's "\udcff" escape gives: half of a UTF-16 pair, no text.
TEXTS: dict[str, str] = {
    "control": "in 1914,\x01\x02\x07 and \x1b[31mended\x7f in",
    "only_control": "\x01\x02\x03\x1b",
    "nul": "in 1914\x00, and ended in",
    "zero_width": "in 19\u200b14, \u200cand\u200d ended\ufeff in",
    "soft_hyphen": "a well\u00adknown war in 1914",
    "bidi": "\u202ein 1914, and\u202c ended \u200fin\u200e \u2066x\u2069",
    "emoji": "\U0001f642 in 1914, \U0001f468\u200d\U0001f469\u200d\U0001f467 and "
    "\U0001f1eb\U0001f1f7",  # a face, a family joined by ZWJ, a flag
    "chinese": "战争于1914年开始，并于1918年结束。",
    "arabic": "بدأت الحرب في عام 1914، وانتهت في",
    "devanagari": "युद्ध 1914 में शुरू हुआ और समाप्त हुआ",
    "combining": "Zoe\u0301 and Beyonce\u0301 walked 1,000 km in 1914",
    "crlf": "The war began in 1914,\r\nand ended in\r\n",
    "separators": "in 1914,\u2028and\u2029ended\x85in\x0b\x0c1918",
    "whitespace_only": " \t\u3000\u00a0 ",
    "quotes_dashes": "\u201cDon\u2019t\u201d \u2013 he said \u2014 in 1914\u20101918\u2026",
    "heading": "== 1914 ==",
    "markers": "@-@ @,@ <unk> </s> <eos> = = =",
    "lone_surrogate": "in \udcff 1914, and",
    "huge_number": "in " + "9" * 400 + ", and " + "1," * 200 + "000",
    "long_word": "x" * 1500,
    # more number separators, and more tags, than sacremoses protects in one call (1,000)
    "many_numbers": "1,000 " * 1100,
    "many_tags": "<B> " * 1100,
}
BIG_LINE = "big_line"  # eval --text only: built when asked (5 MB)


def big_line(n_bytes: int = BIG_LINE_BYTES) -> str:
    return (_SENTENCE * (n_bytes // len(_SENTENCE) + 1))[:n_bytes]


# Outcomes that are known whatever the path (text → "ok" or "error"); others "ok" too unless
# a path says otherwise below.
ERRORS = {"only_control", "whitespace_only"}  # no tokens: one line saying so
# The explorer refuses text that is not Unicode (a lone surrogate) and a prompt over its
# 2,000 characters; generate starts a fresh line after a blank prompt.
_EXPLORER = {"lone_surrogate": "error", "many_numbers": "error", "many_tags": "error"}
# per path: texts whose outcome differs from ERRORS'
PATH_EXPECT: dict[str, dict[str, str]] = {
    # tokenized text is read as it is: a control character is part of a token, not removed
    "predict --input-format tokenized": {"only_control": "ok"},
    "generate": {"whitespace_only": "ok"},
    "generate --input-format tokenized": {"only_control": "ok", "whitespace_only": "ok"},
    "explorer predict": _EXPLORER,
    "explorer predict (tokenized)": {**_EXPLORER, "only_control": "ok"},
    "explorer generate": {**_EXPLORER, "whitespace_only": "ok"},
    "explorer generate (tokenized)": {
        **_EXPLORER,
        "only_control": "ok",
        "whitespace_only": "ok",
    },
    # a file: a NUL is binary, a lone surrogate's byte (0xFF) not UTF-8
    "eval --text": {"lone_surrogate": "error", "nul": "error"},
}
# Cases that fail for a bug in a part of the package another change owns (nslm.data.text),
# reported rather than fixed here: the tests mark them xfail (strict), the benchmark counts
# them apart. Empty once the bug is fixed.
TEXT_KNOWN_BUGS: dict[tuple[str, str], str] = {}
ARGV_UNSAFE = {"nul"}  # a command line cannot hold a NUL byte


@dataclass(frozen=True)
class TextCase:
    path: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.path} [{self.text}]"

    def expected(self) -> str:
        said = PATH_EXPECT.get(self.path, {})
        if self.text in said:
            return said[self.text]
        return "error" if self.text in ERRORS else "ok"

    def known_bug(self) -> str | None:
        return TEXT_KNOWN_BUGS.get((self.path, self.text))

    def value(self, big_line_bytes: int = BIG_LINE_BYTES) -> str:
        return big_line(big_line_bytes) if self.text == BIG_LINE else TEXTS[self.text]


# -- what a success must look like ---------------------------------------------------------


def token_problems(tokens: object) -> list[str]:
    if not isinstance(tokens, list) or not tokens:
        return [f"no tokens: {tokens!r:.80}"]
    bad = [t for t in tokens if not isinstance(t, str) or not t or t.split() != [t]]
    return [f"tokens that are empty or hold whitespace: {bad[:3]!r}"] if bad else []


def prediction_problems(got: dict) -> list[str]:
    problems = token_problems(got.get("tokens"))
    rows = got.get("nnlm", []) + got.get("nslm", [])
    if not rows or not all(0.0 <= r["p"] <= 1.0 for r in rows):
        problems.append("no next tokens, or a probability outside [0, 1]")
    total = got.get("sums", {}).get("nslm", 1.0)
    if not math.isclose(total, 1.0, abs_tol=1e-3):
        problems.append(f"the NSLM's distribution sums to {total}")
    return problems


def terminal_problems(text: str) -> list[str]:
    """Output for a terminal: no control character but line breaks and tabs (an ESC from
    the input would drive the terminal)."""
    bad = sorted({c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0})
    return [f"control characters in the output: {bad!r}"] if bad else []


# -- the paths ------------------------------------------------------------------------------

Runner = Callable[[Path, str, Path], tuple[Outcome | None, list[str]]]


def _cli(
    argv: list[str], check: Callable[[str, Path], list[str]], folder: Path
) -> tuple[Outcome, list[str]]:
    outcome = run_in_process(argv, {"MPLBACKEND": "Agg"})
    return outcome, (check(outcome.stdout, folder) if outcome.code == 0 else [])


def _predict_check(stdout: str, _folder: Path) -> list[str]:
    return prediction_problems(json.loads(stdout))


def _generate_check(stdout: str, _folder: Path) -> list[str]:
    problems = [] if stdout.strip() else ["no continuation printed"]
    return problems + terminal_problems(stdout)


def _eval_check(_stdout: str, folder: Path) -> list[str]:
    payload = json.loads((folder / "tables.json").read_text(encoding="utf-8"))
    ppl = payload["tables"]["numbers"]["rows"]["Global"]["NNLM"]
    bpb = payload.get("text", {}).get("bits_per_byte", 1.0)
    finite = isinstance(ppl, float) and math.isfinite(ppl) and math.isfinite(bpb)
    return [] if finite else [f"perplexity {ppl}, bits per byte {bpb}"]


def predict_cli(input_format: str) -> Runner:
    def run(run_dir: Path, text: str, folder: Path):
        argv = ["predict", str(run_dir), text, "--json", "--input-format", input_format]
        return _cli(argv, _predict_check, folder)

    return run


def generate_cli(input_format: str) -> Runner:
    def run(run_dir: Path, text: str, folder: Path):
        argv = [
            "generate",
            str(run_dir),
            text,
            "--seed",
            "1",
            "--max-tokens",
            "8",
            "--input-format",
            input_format,
        ]
        return _cli(argv, _generate_check, folder)

    return run


def eval_text(run_dir: Path, text: str, folder: Path):
    path = folder / "the-text.txt"
    # as a file holds it: an undecodable byte is written back as the byte it was read from
    path.write_bytes(text.encode("utf-8", errors="surrogateescape"))
    argv = ["eval", str(run_dir), "--text", str(path), "-o", str(folder / "tables.json")]
    return _cli(argv, _eval_check, folder)


_CLIENTS: dict[Path, object] = {}


def client(run_dir: Path):
    """One FastAPI test client per run, its app over that run alone."""
    if run_dir not in _CLIENTS:
        from fastapi.testclient import TestClient

        from nslm.pages.server import create_app

        _CLIENTS[run_dir] = TestClient(create_app({"run": run_dir}), raise_server_exceptions=False)
    return _CLIENTS[run_dir]


def api(endpoint: str, input_format: str) -> Runner:
    def run(run_dir: Path, text: str, _folder: Path):
        body = {"prompt": text, "input_format": input_format}
        if endpoint == "generate":
            body.update(max_tokens=8, seed=1)
        # ASCII JSON, as a browser may send it: a lone surrogate as its "\udcff" escape
        raw = json.dumps(body).encode()
        res = client(run_dir).post(
            f"/api/runs/run/{endpoint}", content=raw, headers={"Content-Type": "application/json"}
        )
        return None, api_problems(res.status_code, res.json(), endpoint)

    return run


def api_problems(status: int, got: dict, endpoint: str) -> list[str]:
    """An answer (200, sane) or a clean refusal (4xx, one line): tagged "error" so the case
    can tell which it was expected to be."""
    if 400 <= status < 500:
        detail = got.get("detail")
        if not isinstance(detail, str) or "\n" in detail or not detail:
            return [f"a {status} whose detail is not one line: {detail!r:.120}"]
        return ["error"]
    if status != 200:
        return [f"status {status}: {json.dumps(got)[:200]}"]
    if endpoint == "predict":
        return prediction_problems(got)
    problems = token_problems(got["read_as"]) if got["read_as"] else []  # [] after a blank
    if got["prompt_text"] + "".join(t["display"] for t in got["tokens"]) != got["text"]:
        problems.append("the pieces do not join into the text")
    return problems


PATHS: dict[str, Runner] = {
    "predict": predict_cli("plain"),
    "predict --input-format tokenized": predict_cli("tokenized"),
    "generate": generate_cli("plain"),
    "generate --input-format tokenized": generate_cli("tokenized"),
    "eval --text": eval_text,
    "explorer predict": api("predict", "plain"),
    "explorer predict (tokenized)": api("predict", "tokenized"),
    "explorer generate": api("generate", "plain"),
    "explorer generate (tokenized)": api("generate", "tokenized"),
}


def all_text_cases() -> list[TextCase]:
    cases = []
    for path in PATHS:
        for text in [*TEXTS, *([BIG_LINE] if path == "eval --text" else [])]:
            if text in ARGV_UNSAFE and not path.startswith(("explorer", "eval")):
                continue
            cases.append(TextCase(path, text))
    return cases


def text_case_problems(
    case: TextCase, run_dir: Path, folder: Path, big_line_bytes: int = BIG_LINE_BYTES
) -> list[str]:
    """Everything wrong with how the path met the text (empty: all good)."""
    folder.mkdir(parents=True, exist_ok=True)
    outcome, problems = PATHS[case.path](run_dir, case.value(big_line_bytes), folder)
    expected = case.expected()
    if outcome is None:  # the API: "error" marks a clean refusal
        refused = problems == ["error"]
        if refused:
            problems = []
        if not problems and refused != (expected == "error"):
            problems.append(f"expected {expected}, got {'a refusal' if refused else 'an answer'}")
        return problems
    if expected == "error":
        return error_problems(outcome)
    return ok_problems(outcome) + problems
