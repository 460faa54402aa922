"""``nslm serve``: the web explorer, a FastAPI app over the runs named at start-up.

``/`` is the explorer page (:mod:`nslm.pages.explorer_page`); ``/api/…`` the JSON API, with
its OpenAPI page at ``/docs``. Runs are addressed by the names given at start-up, never by a
path from a request. Bounds (:class:`~nslm.pages.explorer.Limits`) give 422 with a message,
an unknown run 404, a request the run cannot serve (a neuron of a word LM) 400; an error in
one request leaves the server serving.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, Field

from nslm.atomic import json_text
from nslm.errors import NslmError
from nslm.generation.sampling import SamplingConfig
from nslm.pages.explorer import Limits, RunView
from nslm.pages.explorer_page import explorer_html


class PredictRequest(BaseModel):
    prompt: str = Field(description="Text whose next token is predicted.")
    k: int = Field(10, ge=1, description="How many next tokens to list.")
    within: int = Field(50, ge=1, description="Per class, how many members to list.")


class Sampling(BaseModel):
    temperature: float = Field(1.0, ge=0.0, description="0 = greedy.")
    top_k: int = Field(0, ge=0, description="Sample among the k likeliest (0 = all).")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling (1 = all).")
    seed: int | None = Field(None, description="Fix the random draws.")

    def config(self) -> SamplingConfig:
        return SamplingConfig(temperature=self.temperature, top_k=self.top_k or None,
                              top_p=self.top_p)  # fmt: skip


class GenerateRequest(Sampling):
    prompt: str = ""
    max_tokens: int = Field(30, ge=1, description="Tokens (bytes for a byte LM) to generate.")


class BytesRequest(Sampling):
    prime: str = ""
    max_bytes: int = Field(200, ge=1)
    neuron: int = Field(0, ge=0, description="Colour each character by this neuron.")


class SentimentRequest(BaseModel):
    text: str = Field(description="A review or sentence to classify.")


def _bounded(text: str, limits: Limits, what: str) -> str:
    if len(text) > limits.max_prompt_chars:
        raise HTTPException(422, f"{what} is {len(text):,} characters; the limit is "
                                 f"{limits.max_prompt_chars:,}")  # fmt: skip
    return text


def _at_most(value: int, limit: int, what: str) -> int:
    if value > limit:
        raise HTTPException(422, f"{what} = {value:,} is above the limit of {limit:,}")
    return value


class JSONText(Response):
    """A JSON answer written once by :func:`nslm.atomic.json_text` (non-finite floats as
    null): FastAPI's own encoding of a returned dict walks it twice more, ~3 ms of a 10 ms
    prediction with its class breakdown (measured on a tiny run)."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json_text(content, indent=None).encode("utf-8")


def create_app(runs: dict[str, Path], limits: Limits | None = None) -> FastAPI:  # noqa: C901
    """The app over ``runs`` (name → run directory), each loaded now."""
    limits = limits or Limits()
    if not runs:
        raise NslmError("serve needs at least one run")
    views = {name: RunView(name, path, limits) for name, path in runs.items()}
    about = "Next tokens, generation and byte-LM neurons of nslm runs."
    app = FastAPI(title="nslm explorer", version="1", description=about,
                  default_response_class=JSONText)  # fmt: skip

    def view(name: str) -> RunView:
        if name not in views:
            raise HTTPException(404, f"no run named {name!r}; runs: {', '.join(views)}")
        return views[name]

    @app.exception_handler(NslmError)
    async def nslm_error(_: Request, exc: NslmError) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> str:
        return explorer_html([v.describe() for v in views.values()], limits)

    @app.get("/api/runs", summary="The runs this server was started with")
    def list_runs() -> list[dict]:
        return [v.describe() for v in views.values()]

    @app.post("/api/runs/{name}/predict", summary="Top-k next tokens, NNLM and NSLM")
    def predict(name: str, body: PredictRequest) -> JSONText:
        run = view(name)
        prompt = _bounded(body.prompt, limits, "prompt")
        k = _at_most(body.k, limits.max_k, "k")
        within = _at_most(body.within, limits.max_within, "within")
        return JSONText(run.predict(prompt, k, within))

    @app.post("/api/runs/{name}/generate", summary="Continue a prompt")
    def generate(name: str, body: GenerateRequest) -> JSONText:
        run = view(name)
        prompt = _bounded(body.prompt, limits, "prompt")
        n = _at_most(body.max_tokens, limits.max_tokens, "max_tokens")
        return JSONText(run.generate(prompt, n, body.config(), body.seed))

    @app.post("/api/runs/{name}/bytes", summary="Byte LM: sample, coloured by a neuron")
    def sample_bytes(name: str, body: BytesRequest) -> JSONText:
        run = view(name)
        prime = _bounded(body.prime, limits, "prime")
        n = _at_most(body.max_bytes, limits.max_tokens, "max_bytes")
        return JSONText(run.sample_bytes(prime, n, body.config(), body.seed, body.neuron))

    @app.post("/api/runs/{name}/sentiment", summary="Byte LM: classify a review")
    def sentiment(name: str, body: SentimentRequest) -> JSONText:
        run = view(name)
        return JSONText(run.sentiment(_bounded(body.text, limits, "text")))

    return app


def serve(runs: dict[str, Path], host: str = "127.0.0.1", port: int = 8000,
          limits: Limits | None = None, workers: int = 1) -> None:  # fmt: skip
    """Load the runs and serve until interrupted.

    Torch computes each request on one thread: a request is small (one prompt), and two
    threads spinning for each other while the server's other threads parse and answer cost
    more than they bring (a tiny run: 8 ms a prediction on one thread against 15–150 ms on
    two, on a busy 2-core machine). ``workers`` > 1 starts that many server processes, each
    with its own copy of the runs, so that as many requests are computed at once (one per
    core); uvicorn then needs the app as an import string, and the runs and limits travel to
    the workers in the environment (:func:`app_from_env`).
    """
    import uvicorn

    if workers <= 1:
        _one_thread()
        uvicorn.run(create_app(runs, limits), host=host, port=port, log_level="warning")
        return
    limits = limits or Limits()
    os.environ[ENV] = json.dumps({"runs": {n: str(p) for n, p in runs.items()},
                                  "limits": asdict(limits)})  # fmt: skip
    uvicorn.run("nslm.pages.server:app_from_env", factory=True, host=host, port=port,
                workers=workers, log_level="warning")  # fmt: skip


ENV = "NSLM_SERVE"  # the runs and limits of a multi-worker server, as JSON


def app_from_env() -> FastAPI:
    """The app of one worker process of :func:`serve` (uvicorn calls it in each worker)."""
    config = json.loads(os.environ[ENV])
    _one_thread()
    runs = {name: Path(path) for name, path in config["runs"].items()}
    return create_app(runs, Limits(**config["limits"]))


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)
