"""``nslm serve``: the explorer's JSON API on tiny runs, through FastAPI's test client (every
endpoint, every bound, unknown runs), and the real server started by the CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from helpers import served
from nslm.cli import main
from nslm.data.text import to_plain
from nslm.errors import NslmError
from nslm.pages.explorer import Limits, RunView
from nslm.pages.pieces import plain_pieces
from nslm.pages.server import create_app

PROMPT = "In 1990, the city of"  # plain text, as a person types it


@pytest.fixture(scope="module")
def client(tiny_nslm_run: Path, tiny_byte_run: Path) -> TestClient:
    limits = Limits(max_prompt_chars=300, max_tokens=40, max_k=20)
    app = create_app({"words": tiny_nslm_run, "bytes": tiny_byte_run}, limits)
    return TestClient(app, raise_server_exceptions=False)


def test_runs_and_page(client: TestClient) -> None:
    runs = {r["name"]: r for r in client.get("/api/runs").json()}
    assert runs["words"]["kind"] == "nslm" and runs["bytes"]["kind"] == "byte"
    assert runs["words"]["can"]["predict"] and not runs["bytes"]["can"]["predict"]
    page = client.get("/")
    assert page.status_code == 200 and "nslm explorer" in page.text and '"words"' in page.text
    paths = set(client.get("/openapi.json").json()["paths"])
    assert {
        "/api/runs",
        "/api/runs/{name}/predict",
        "/api/runs/{name}/generate",
        "/api/runs/{name}/bytes",
        "/api/runs/{name}/sentiment",
    } <= paths


def test_predict_is_the_cli_prediction(client: TestClient, tiny_nslm_run: Path, capsys) -> None:
    got = client.post("/api/runs/words/predict", json={"prompt": PROMPT, "k": 5}).json()
    assert main(["predict", str(tiny_nslm_run), PROMPT, "--n-best", "5", "--json"]) == 0
    want = json.loads(capsys.readouterr().out)
    assert [t["token"] for t in got["nslm"]] == [t["token"] for t in want["nslm"]]
    for a, b in zip(got["nslm"], want["nslm"], strict=True):
        assert a["p"] == pytest.approx(b["p"], rel=1e-6)
    assert got["sums"]["nslm"] == pytest.approx(1.0, abs=1e-4)
    # per class, members with their values (a year chart) or coordinates (a place map)
    by_class = {c["class"]: c for c in got["classes"]}
    assert by_class["<year>"]["top"][0]["value"] >= 1000
    cities = by_class.get("<city>")
    if cities is not None:
        assert all("lat" in m for m in cities["top"])


def test_generate_is_seeded_and_marks_class_tokens(client: TestClient) -> None:
    body = {"prompt": PROMPT, "max_tokens": 25, "seed": 3, "temperature": 1.0}
    a = client.post("/api/runs/words/generate", json=body).json()
    b = client.post("/api/runs/words/generate", json=body).json()
    assert a == b and len(a["tokens"]) == 25
    assert all(t["class"] is None or isinstance(t["class"], str) for t in a["tokens"])
    # the text is the prompt's piece and then each generated token's, in order
    assert a["prompt_text"] + "".join(t["display"] for t in a["tokens"]) == a["text"]
    assert a["text"].startswith("In 1990, the city of")


def test_a_plain_prompt_is_read_by_the_runs_rules(client: TestClient) -> None:
    """Plain text is tokenized as WikiText was ("1914," → "1914 ,"), so the <year>
    micro-model sees 1914 as its previous year; tokenized text passes through unchanged."""
    prompt = "The well-known war began in 1914, and ended in"
    plain = client.post("/api/runs/words/predict", json={"prompt": prompt}).json()
    assert " ".join(plain["tokens"]) == "The well @-@ known war began in 1914 , and ended in"
    assert plain["oov"] == [] or "1914," not in plain["oov"]
    year = next(c for c in plain["classes"] if c["class"] == "<year>")
    assert year["context"] == "1914"
    asked = {"prompt": prompt, "input_format": "tokenized"}
    tokenized = client.post("/api/runs/words/predict", json=asked).json()
    assert tokenized["tokens"] == prompt.split()  # "well-known", "1914," as they are
    assert "1914," in tokenized["oov"]
    corpus_form = {"prompt": " ".join(plain["tokens"]), "input_format": "tokenized"}
    same = client.post("/api/runs/words/predict", json=corpus_form).json()
    assert same["tokens"] == plain["tokens"] and same["nslm"] == plain["nslm"]


def test_generate_answers_plain_text_or_tokens(client: TestClient) -> None:
    body = {"prompt": "The well-known war began in 1914, and ended in", "max_tokens": 40, "seed": 5}
    plain = client.post("/api/runs/words/generate", json=body).json()
    assert " ".join(plain["read_as"]) == "The well @-@ known war began in 1914 , and ended in"
    assert plain["prompt_text"] == body["prompt"]
    assert " @-@ " not in plain["text"] and " @,@ " not in plain["text"]
    assert plain["text"] == to_plain([*plain["read_as"], *(t["token"] for t in plain["tokens"])])
    tokens = client.post(
        "/api/runs/words/generate", json={**body, "output_format": "tokenized"}
    ).json()
    assert [t["token"] for t in tokens["tokens"]] == [t["token"] for t in plain["tokens"]]
    assert tokens["prompt_text"] == "The well @-@ known war began in 1914 , and ended in"
    assert tokens["text"].split() == [
        t for t in [*tokens["read_as"], *(t["token"] for t in tokens["tokens"])] if t != "<eos>"
    ]


def test_pieces_cut_plain_text_at_tokens() -> None:
    prompt = ["In", "1914", ","]
    generated = ["the", "well", "@-@", "known", "New_York", "(", "16", "km", ")", "<eos>", "A"]
    prompt_text, pieces = plain_pieces(prompt, generated, "wikitext")
    assert prompt_text == "In 1914,"
    assert pieces == [" the", " well", "-", "known", " New York", " (", "16", " km", ")", "\n", "A"]
    assert plain_pieces([], [], "wikitext") == ("", [])
    assert plain_pieces(["a"], ["b", "<eos>"], "whitespace") == ("a", [" b", "\n"])


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"prompt": "a", "input_format": "wikitext"}, "input_format must be one of plain"),
        ({"prompt": "a", "output_format": "html"}, "output_format must be one of plain"),
        ({"prompt": "in \ud800 1914"}, "lone surrogate (U+D800) at character 4"),
        ({"prompt": "\u0000\u0007\u001b"}, "no tokens"),
        ({"prompt": 3}, "prompt: Input should be a valid string"),
    ],
)
def test_bad_text_and_formats_get_one_line(client: TestClient, body: dict, needle: str) -> None:
    for path in ("predict", "generate"):
        if path == "predict" and "output_format" in body:
            continue
        res = client.post(
            f"/api/runs/words/{path}",
            content=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        assert 400 <= res.status_code < 500, res.text
        detail = res.json()["detail"]
        assert isinstance(detail, str) and "\n" not in detail and needle in detail


def test_a_lone_surrogate_is_refused_in_every_text_field(client: TestClient) -> None:
    for path, field in (
        ("words/predict", "prompt"),
        ("words/generate", "prompt"),
        ("bytes/bytes", "prime"),
        ("bytes/sentiment", "text"),
    ):
        raw = json.dumps({field: "ok \udc80"}).encode()  # JSON's escape: no UTF-8 for it
        res = client.post(
            f"/api/runs/{path}", content=raw, headers={"Content-Type": "application/json"}
        )
        assert res.status_code == 422 and "lone surrogate (U+DC80)" in res.json()["detail"]
    broken = client.post(
        "/api/runs/words/predict",
        content=b'{"prompt": "a",',
        headers={"Content-Type": "application/json"},
    )
    assert broken.status_code == 422 and "not JSON" in broken.json()["detail"]


def test_bytes_are_coloured_by_the_neuron(client: TestClient) -> None:
    body = {"prime": "the movie", "max_bytes": 30, "neuron": 3, "seed": 1}
    got = client.post("/api/runs/bytes/bytes", json=body).json()
    text = "".join(c["char"] for c in got["chars"])
    assert text.startswith("the movie") and len(got["chars"]) >= len("the movie")
    assert all(-1.0 <= c["value"] <= 1.0 for c in got["chars"])
    wrong = client.post("/api/runs/bytes/bytes", json={**body, "neuron": 10_000})
    assert wrong.status_code == 400 and "out of range" in wrong.json()["detail"]
    assert client.post("/api/runs/words/bytes", json=body).status_code == 400


@pytest.mark.parametrize(
    ("path", "body", "status", "needle"),
    [
        ("/api/runs/nope/predict", {"prompt": "a"}, 404, "no run named 'nope'"),
        ("/api/runs/words/predict", {"prompt": "x" * 301}, 422, "limit is 300"),
        ("/api/runs/words/predict", {"prompt": "a", "k": 21}, 422, "k = 21"),
        ("/api/runs/words/predict", {"prompt": "a", "k": 0}, 422, "greater than or equal"),
        ("/api/runs/words/generate", {"prompt": "a", "max_tokens": 41}, 422, "max_tokens"),
        ("/api/runs/bytes/bytes", {"prime": "a", "max_bytes": 41}, 422, "max_bytes"),
        ("/api/runs/bytes/sentiment", {"text": "fine"}, 400, "no sentiment probe"),
        ("/api/runs/bytes/predict", {"prompt": "a"}, 400, "byte run"),
        ("/api/runs/..%2F..%2Fetc/predict", {"prompt": "a"}, 404, "Not Found"),
        ("/api/runs/..%2Fwords/predict", {"prompt": "a"}, 404, "Not Found"),
    ],
)
def test_bounds_and_bad_requests(
    client: TestClient, path: str, body: dict, status: int, needle: str
) -> None:
    res = client.post(path, json=body)
    assert res.status_code == status, res.text
    assert needle in json.dumps(res.json()["detail"])


def test_a_failing_request_leaves_the_server_serving(client: TestClient, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(RunView, "predict", broken)
    assert client.post("/api/runs/words/predict", json={"prompt": "a"}).status_code == 500
    monkeypatch.undo()
    assert client.post("/api/runs/words/predict", json={"prompt": "a"}).status_code == 200


def test_sentiment_with_a_probe(tiny_byte_run: Path, labelled_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "bytes"
    shutil.copytree(tiny_byte_run, run)
    assert main(["probe", "sentiment", str(run), "--no-figures"]) == 0
    client = TestClient(create_app({"bytes": run}))
    got = client.post("/api/runs/bytes/sentiment", json={"text": "the movie was great ."}).json()
    assert 0.0 <= got["p_positive"] <= 1.0 and got["label"] in ("positive", "negative")
    assert got["neuron_label"] in ("positive", "negative") and 0 <= got["neuron"] < 64


def test_the_cli_serves_on_loopback(tiny_byte_run: Path) -> None:
    with served(tiny_byte_run, seconds=60) as url:
        with urllib.request.urlopen(url + "/api/runs", timeout=10) as response:
            runs = json.loads(response.read())
        assert runs[0]["name"] == tiny_byte_run.name
        port = url.rsplit(":", 1)[1]
        listening = subprocess.run(["ss", "-ltn"], capture_output=True, text=True).stdout
        assert f"127.0.0.1:{port}" in listening and f"0.0.0.0:{port}" not in listening


def test_two_worker_processes_serve_the_same_runs(tiny_byte_run: Path) -> None:
    with served(tiny_byte_run, seconds=90, options=("--workers", "2")) as url:
        body = json.dumps({"prime": "the movie", "max_bytes": 8, "seed": 1}).encode()
        name = tiny_byte_run.name
        texts = set()
        for _ in range(6):  # requests land on either process; a seeded sample is the same
            request = urllib.request.Request(
                f"{url}/api/runs/{name}/bytes",
                data=body,
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                texts.add(json.dumps(json.loads(response.read())["chars"]))
        assert len(texts) == 1
        missing = urllib.request.Request(
            f"{url}/api/runs/nope/bytes", data=body, headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(missing, timeout=30)
        assert error.value.code == 404


def test_serve_needs_runs() -> None:
    assert main(["serve", "/nonexistent/run"]) == 2


def test_concurrent_predictions_are_computed_together_and_each_answered(tiny_nslm_run) -> None:
    prompts = [f"In {1900 + i}, the city of" for i in range(24)] + ["   "]
    alone = RunView("alone", tiny_nslm_run)
    want = {p: alone.predict(p, 5, 10) for p in prompts[:-1]}
    view = RunView("together", tiny_nslm_run)
    with ThreadPoolExecutor(8) as pool:
        futures = {p: pool.submit(view.predict, p, 5, 10) for p in prompts}
    with pytest.raises(NslmError, match="empty"):  # the bad prompt fails alone
        futures["   "].result()
    for p in prompts[:-1]:
        got = futures[p].result()
        assert [t["token"] for t in got["nslm"]] == [t["token"] for t in want[p]["nslm"]]
        assert got["nslm"][0]["p"] == pytest.approx(want[p]["nslm"][0]["p"], rel=1e-5)
    assert sum(view._predictions.batch_sizes) >= len(prompts)
    # the input format is part of the request: the same text read both ways, neither cached
    # as the other
    assert view.predict("well-known", 5, 10, "tokenized")["tokens"] == ["well-known"]
    assert view.predict("well-known", 5, 10)["tokens"] == ["well", "@-@", "known"]
    with pytest.raises(NslmError, match="unknown input format"):
        view.predict("a", 5, 10, "html")
