"""``nslm serve``: the web explorer, a FastAPI app over the runs named at start-up.

``/`` is the explorer page (:mod:`nslm.pages.explorer_page`); ``/api/…`` the JSON API, with
its OpenAPI page at ``/docs``. Runs are addressed by the names given at start-up, never by a
path from a request. Bounds (:class:`~nslm.pages.explorer.Limits`) give 422 with a message,
an unknown run 404, a request the run cannot serve (a neuron of a word LM) 400; an error in
one request leaves the server serving. Every error's ``detail`` is one line of text, and
every answer is ASCII JSON: text that is not valid Unicode (a lone surrogate, which JSON can
spell as ``"\ud800"``) is refused with 422 before anything reads it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel, Field

from nslm.data.text import INPUT_FORMATS, OUTPUT_FORMATS
from nslm.errors import NslmError
from nslm.files.json_policy import json_text
from nslm.generation.sampling import SamplingConfig
from nslm.pages.explorer import Limits, RunView
from nslm.pages.explorer_page import explorer_html


def _format_field(choices: tuple[str, ...], description: str) -> Any:
    """A format's field: listed as a choice in the OpenAPI page, checked by :func:`_choice`
    (a one-line 422 rather than pydantic's list of errors)."""
    return Field("plain", description=description, json_schema_extra={"enum": list(choices)})


INPUT_FORMAT_HELP = (
    "plain: plain text, tokenized by the run's rules ('1914,' reads as '1914 ,'); "
    "tokenized: already in the corpus's tokens, read as it is."
)
OUTPUT_FORMAT_HELP = "plain: the answer's text as plain text; tokenized: the model's tokens."


class PredictRequest(BaseModel):
    prompt: str = Field(description="Text whose next token is predicted.")
    k: int = Field(10, ge=1, description="How many next tokens to list.")
    within: int = Field(50, ge=1, description="Per class, how many members to list.")
    input_format: str = _format_field(INPUT_FORMATS, INPUT_FORMAT_HELP)


class Sampling(BaseModel):
    temperature: float = Field(1.0, ge=0.0, description="0 = greedy.")
    top_k: int = Field(0, ge=0, description="Sample among the k likeliest (0 = all).")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling (1 = all).")
    seed: int | None = Field(None, description="Fix the random draws.")

    def config(self) -> SamplingConfig:
        return SamplingConfig(
            temperature=self.temperature, top_k=self.top_k or None, top_p=self.top_p
        )


class GenerateRequest(Sampling):
    prompt: str = ""
    max_tokens: int = Field(30, ge=1, description="Tokens (bytes for a byte LM) to generate.")
    input_format: str = _format_field(INPUT_FORMATS, INPUT_FORMAT_HELP)
    output_format: str = _format_field(OUTPUT_FORMATS, OUTPUT_FORMAT_HELP)


class BytesRequest(Sampling):
    prime: str = ""
    max_bytes: int = Field(200, ge=1)
    neuron: int = Field(0, ge=0, description="Colour each character by this neuron.")
    # the options of nslm generate, as text (nslm.byte_lm.steering.intervention_from_fields)
    ablate: str = Field("", description="Units to ablate at every step, e.g. 356,12.")
    ablate_mode: str = Field("zero", description="zero or mean.")
    clamp: str = Field("", description="Cell values to fix, e.g. 356=1.5.")
    steer: str = Field("", description="output:BYTES, random:SEED or sentiment.")
    steer_at: str = Field("hidden", description="cell, hidden and/or candidate.")
    steer_scale: float = Field(1.0, description="α: the direction times α is added.")


class SentimentRequest(BaseModel):
    text: str = Field(description="A review or sentence to classify.")


def _bounded(text: str, limits: Limits, what: str) -> str:
    if len(text) > limits.max_prompt_chars:
        raise HTTPException(
            422, f"{what} is {len(text):,} characters; the limit is {limits.max_prompt_chars:,}"
        )
    # JSON may spell half of a UTF-16 pair alone ("\ud800"): no text, and no UTF-8 either
    bad = next((i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff"), None)
    if bad is not None:
        raise HTTPException(
            422,
            f"{what} is not valid Unicode: a lone surrogate "
            f"(U+{ord(text[bad]):04X}) at character {bad + 1}",
        )
    return text


def _choice(value: str, choices: tuple[str, ...], what: str) -> str:
    if value not in choices:
        raise HTTPException(422, f"{what} must be one of {', '.join(choices)}, not {value[:40]!a}")
    return value


def _at_most(value: int, limit: int, what: str) -> int:
    if value > limit:
        raise HTTPException(422, f"{what} = {value:,} is above the limit of {limit:,}")
    return value


class JSONText(Response):
    """A JSON answer written once by :func:`nslm.files.json_policy.json_text` (non-finite floats as
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
    app = FastAPI(
        title="nslm explorer", version="1", description=about, default_response_class=JSONText
    )

    def view(name: str) -> RunView:
        if name not in views:
            raise HTTPException(404, f"no run named {name!r}; runs: {', '.join(views)}")
        return views[name]

    @app.exception_handler(NslmError)
    async def nslm_error(_: Request, exc: NslmError) -> JSONText:
        # ASCII JSON: a message quoting the request's text cannot fail to encode
        return JSONText(status_code=400, content={"detail": str(exc)})

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONText:
        return JSONText(
            status_code=exc.status_code, content={"detail": exc.detail}, headers=exc.headers
        )

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONText:
        """pydantic's errors as one line ("k: Input should be greater than or equal to 1"),
        without echoing the input (which may be text that cannot be encoded)."""
        lines = []
        for error in exc.errors():
            if error.get("type") == "json_invalid":
                lines.append(f"the body is not JSON ({error.get('ctx', {}).get('error', '?')})")
                continue
            where = ".".join(str(part) for part in error.get("loc", ())[1:])  # after "body"
            lines.append(f"{where}: {error.get('msg', 'invalid')}" if where else error["msg"])
        return JSONText(status_code=422, content={"detail": "; ".join(lines) or "invalid"})

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
        input_format = _choice(body.input_format, INPUT_FORMATS, "input_format")
        return JSONText(run.predict(prompt, k, within, input_format))

    @app.post("/api/runs/{name}/generate", summary="Continue a prompt")
    def generate(name: str, body: GenerateRequest) -> JSONText:
        run = view(name)
        prompt = _bounded(body.prompt, limits, "prompt")
        n = _at_most(body.max_tokens, limits.max_tokens, "max_tokens")
        input_format = _choice(body.input_format, INPUT_FORMATS, "input_format")
        output_format = _choice(body.output_format, OUTPUT_FORMATS, "output_format")
        return JSONText(
            run.generate(prompt, n, body.config(), body.seed, input_format, output_format)
        )

    @app.post("/api/runs/{name}/bytes", summary="Byte LM: sample, coloured by a neuron")
    def sample_bytes(name: str, body: BytesRequest) -> JSONText:
        run = view(name)
        prime = _bounded(body.prime, limits, "prime")
        n = _at_most(body.max_bytes, limits.max_tokens, "max_bytes")
        fields = body.model_dump(
            include={"ablate", "ablate_mode", "clamp", "steer", "steer_at", "steer_scale"}
        )
        return JSONText(run.sample_bytes(prime, n, body.config(), body.seed, body.neuron, fields))

    @app.post("/api/runs/{name}/sentiment", summary="Byte LM: classify a review")
    def sentiment(name: str, body: SentimentRequest) -> JSONText:
        run = view(name)
        return JSONText(run.sentiment(_bounded(body.text, limits, "text")))

    return app


def serve(
    runs: dict[str, Path],
    host: str = "127.0.0.1",
    port: int = 8000,
    limits: Limits | None = None,
    workers: int = 1,
) -> None:
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
    os.environ[ENV] = json.dumps(
        {"runs": {n: str(p) for n, p in runs.items()}, "limits": asdict(limits)}
    )
    uvicorn.run(
        "nslm.pages.server:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
    )


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
