"""Screenshots of the report and the explorer for the docs (docs/img/), in Debian's chromium.

    python docs/screenshots.py --runs runs/byte-lm [runs/wt2-cpu …]

For each run: its report (``nslm report``) as ``docs/img/report-NAME.png``; then the explorer
over all the runs, one screenshot per run, after the panel that run is for has answered
(``docs/img/explorer-NAME.png``): next token for a word LM with micro-models, a coloured
sample and a classified review for a byte LM.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import sync_playwright

IMG = Path(__file__).parent / "img"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, nargs="+", required=True)
    args = parser.parse_args()
    IMG.mkdir(exist_ok=True)
    for run in args.runs:
        subprocess.run([sys.executable, "-m", "nslm", "report", str(run)], check=True)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "nslm", "serve", *map(str, args.runs),
                               "--port", str(port)])  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/api/runs", timeout=2).close()
                break
            except OSError:
                time.sleep(0.5)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"),
                                        args=["--no-sandbox"])  # fmt: skip
            page = browser.new_page(viewport={"width": 1200, "height": 1000})
            for run in args.runs:
                page.goto((run / "report.html").resolve().as_uri())
                page.screenshot(path=str(IMG / f"report-{run.name}.png"))
                page.goto(url)
                page.select_option("#run", run.name)
                if page.locator("#predict-panel").is_visible():
                    page.click("#predict-btn")
                    page.wait_for_selector(".bar.nslm, .bar.nnlm")
                if page.locator("#bytes-panel").is_visible():
                    page.fill("#neuron", "356")
                    page.click("#bytes-btn")
                    page.wait_for_selector("#bytes-out span")
                if page.locator("#sentiment-panel").is_visible():
                    page.click("#sentiment-btn")
                    page.wait_for_selector(".verdict")
                page.screenshot(path=str(IMG / f"explorer-{run.name}.png"), full_page=True)
                print(f"wrote docs/img/report-{run.name}.png and explorer-{run.name}.png")
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
