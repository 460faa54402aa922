"""A bounded burst against the explorer's next-token endpoint: latency and errors.

    python benchmarks/house/serve_load.py --run runs/wt2-cpu [--requests 500] [--concurrency 20]
                                    [--workers 2]

Starts ``nslm serve RUN --workers N`` on 127.0.0.1 (a free port; one server process per
core by default), waits until it answers, then sends
``--requests`` POSTs to ``/api/runs/NAME/predict`` from ``--concurrency`` client threads,
each with a different prompt (the opening words of WikiText-2 valid lines, so the server's
cache never answers) and ``k = 10``. Writes benchmarks/results/serve_load.json: requests,
concurrency, errors, p50_ms, p95_ms (and the mean, max, requests per second, and the CPU
the server's processes and this client spent per request), run, command, date. Only
127.0.0.1 is ever contacted.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from machine import machine_info, today
from nslm.files.atomic import write_json_atomic

OUT = Path(__file__).resolve().parents[1] / "results" / "serve_load.json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prompts(n: int, words: int = 12) -> list[str]:
    """``n`` distinct prompts: the first words of WikiText-2 valid lines."""
    from nslm.data.locate import locate_corpus
    from nslm.data.prepare import split_lines
    from nslm.data.textfile import read_text

    seen, out = set(), []
    for line in split_lines(read_text(locate_corpus("wikitext-2")["valid"])):
        tokens = line.split()
        if len(tokens) < 4 or tokens[0] == "=":
            continue
        prompt = " ".join(tokens[:words])
        if prompt not in seen:
            seen.add(prompt)
            out.append(prompt)
        if len(out) == n:
            return out
    raise SystemExit(f"only {len(out)} distinct prompts in WikiText-2 valid")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` and every process below it (uvicorn's workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:  # exited meanwhile
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        todo += [int(c) for c in children]
    return total


def wait_until_up(url: str, proc: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/api/runs", timeout=2).close()
            return
        except OSError:
            if proc.poll() is not None:
                raise SystemExit("the server exited before answering") from None
            time.sleep(0.5)
    raise SystemExit(f"the server did not answer within {seconds:.0f} s")


def one_request(url: str, prompt: str) -> tuple[float, bool]:
    # WikiText's own lines: already in the corpus's tokens, read as they are
    body = json.dumps({"prompt": prompt, "k": 10, "input_format": "tokenized"}).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            ok = response.status == 200 and bool(json.loads(response.read())["nnlm"])
    except OSError:
        ok = False
    return (time.perf_counter() - start) * 1000.0, ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="nslm serve --workers [one per core]",
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    texts = prompts(args.requests)
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nslm",
            "serve",
            str(args.run),
            "--port",
            str(port),
            "--workers",
            str(args.workers),
        ],
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(base, server)
        url = f"{base}/api/runs/{args.run.name}/predict"
        for i in range(4 * args.workers):  # each process's first calls build caches
            one_request(url, f"warm up {i}")
        server_cpu, client_cpu = cpu_seconds(server.pid), time.process_time()
        started = time.perf_counter()
        with ThreadPoolExecutor(args.concurrency) as pool:
            results = list(pool.map(lambda p: one_request(url, p), texts))
        wall = time.perf_counter() - started
        server_cpu = cpu_seconds(server.pid) - server_cpu
        client_cpu = time.process_time() - client_cpu
    finally:
        server.terminate()
        server.wait(timeout=30)
    ms = np.array([r[0] for r in results])
    errors = sum(not ok for _, ok in results)
    out = {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "workers": args.workers,
        "errors": errors,
        "p50_ms": float(np.percentile(ms, 50)),
        "p95_ms": float(np.percentile(ms, 95)),
        "mean_ms": float(ms.mean()),
        "max_ms": float(ms.max()),
        "requests_per_s": args.requests / wall,
        # where the two cores went: the server's processes and this client, per request
        "server_cpu_ms_per_request": 1000.0 * server_cpu / args.requests,
        "client_cpu_ms_per_request": 1000.0 * client_cpu / args.requests,
        "run": str(args.run),
        "command": "python " + shlex.join(sys.argv),
        "date": today(),
        "machine": machine_info(),
    }
    write_json_atomic(args.out, out)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
