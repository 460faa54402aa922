"""The explorer and the report in a real browser: Playwright driving Debian's chromium.

Skipped where chromium or Playwright is missing, except under CI (``CI`` set), where a
missing browser is a failure: CI installs both (.ci/run).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers import browser_mark, served
from helpers import browser_page as open_page
from nslm.cli import main

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = browser_mark()


@pytest.fixture(scope="module")
def server(tiny_nslm_run: Path, tiny_byte_run: Path) -> Iterator[str]:
    with served(tiny_nslm_run, tiny_byte_run) as url:
        yield url


@pytest.fixture(scope="module")
def browser_page() -> Iterator[Page]:
    with open_page() as page:
        yield page


def submit(page: Page, url: str, fields: dict[str, str], button: str, answer: str) -> None:
    """Open the explorer, fill ``fields`` (selector → text), press ``button``, and wait for
    the ``answer`` selector to appear."""
    page.goto(url)
    for selector, text in fields.items():
        page.fill(selector, text)
    page.click(button)
    page.wait_for_selector(answer)


def test_next_token_shows_both_models_and_the_breakdown(
    server: str, browser_page: Page, tmp_path: Path
) -> None:
    page = browser_page
    fields = {"#prompt": "In 1990, the city of", "#k": "7"}
    submit(page, server, fields, "#predict-btn", ".bar.nslm")
    assert page.locator(".bar.nnlm").count() == 7 and page.locator(".bar.nslm").count() == 7
    heads = page.locator("h3.class-head").all_inner_texts()
    assert any(h.startswith("<year>") for h in heads)
    assert page.locator("svg.value-chart line").count() > 1  # years drawn by value
    assert "P(class)" in page.locator("#predict-out").inner_text()
    page.screenshot(path=str(tmp_path / "predict.png"), full_page=True)
    assert (tmp_path / "predict.png").stat().st_size > 10_000


def test_generate_marks_class_tokens(server: str, browser_page: Page) -> None:
    page = browser_page
    fields = {"#gen-prompt": "In 1990,", "#gen-max": "40"}
    page.goto(server)
    page.check("#gen-tokens")  # the model's tokens, one word each
    for selector, text in fields.items():
        page.fill(selector, text)
    page.click("#generate-btn")
    page.wait_for_selector("#generate-out p.continuation")
    text = page.locator("#generate-out p.continuation").inner_text()
    words = text.split()
    # "In 1990 ," then 40 tokens, each <eos> among them a line break rather than a word
    assert words[:3] == ["In", "1990", ","] and len(words) >= 3 + 40 - text.count("\n")
    assert page.locator("#generate-out .read-as").inner_text() == "In 1990 ,"


def test_plain_text_in_and_out(server: str, browser_page: Page) -> None:
    """A sentence typed as a person writes it is read as WikiText was tokenized: the <year>
    micro-model's previous year is 1914 (not an unknown "1914,"), and the continuation reads
    as plain text."""
    page = browser_page
    sentence = "The war began in 1914, and ended in"
    submit(page, server, {"#prompt": sentence}, "#predict-btn", ".bar.nslm")
    assert page.locator("#predict-out .read-as").inner_text() == (
        "The war began in 1914 , and ended in"
    )
    year = page.locator("h3.class-head", has_text="<year>")
    assert year.locator(".context").inner_text() == "1914"
    assert "previous: 1914" in year.inner_text()
    fields = {"#gen-prompt": sentence, "#gen-max": "40"}
    submit(page, server, fields, "#generate-btn", "#generate-out p.continuation")
    text = page.locator("#generate-out p.continuation").inner_text()
    assert text.startswith(sentence) and len(text) > len(sentence) + 40
    for tokenized in (" @-@ ", " @,@ ", " @.@ ", "1914 ,", " , ", " . ", " 's "):
        assert tokenized not in text, (tokenized, text)


def test_a_bad_request_shows_its_message(server: str, browser_page: Page) -> None:
    page = browser_page
    submit(page, server, {"#k": "500"}, "#predict-btn", "#predict-out .error")
    assert "422" in page.locator("#predict-out .error").inner_text()


def test_byte_lm_sample_is_coloured(server: str, browser_page: Page, tiny_byte_run: Path) -> None:
    page = browser_page
    page.goto(server)
    page.select_option("#run", tiny_byte_run.name)
    assert page.locator("#predict-panel").is_hidden()
    page.fill("#prime", "the movie")
    page.fill("#neuron", "2")
    page.click("#bytes-btn")
    page.wait_for_selector("#bytes-out span")
    spans = page.locator("#bytes-out span")
    assert spans.count() >= len("the movie")
    assert "rgb(" in (spans.first.get_attribute("style") or "")


def test_the_report_opens_offline(tiny_nslm_copy: Path, browser_page: Page) -> None:
    run = tiny_nslm_copy
    assert main(["eval", str(run), "--split", "test", "--prefix-tokens", "20000"]) == 0
    assert main(["report", str(run)]) == 0
    page = browser_page
    page.route("http*://**", lambda route: route.abort())  # offline: nothing may be fetched
    page.goto((run / "report.html").as_uri())
    assert page.locator("h2").count() >= 4
    assert page.locator("table").count() >= 4
    widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.naturalWidth)")
    assert widths and all(w > 0 for w in widths)
    # sorting: a click on a header sorts the rows by it, a second click the other way
    config = page.locator("table.sortable", has=page.locator("th", has_text="key")).last
    keys = config.locator("tbody tr td:first-child")
    config.locator("th").first.click()
    ascending = keys.all_inner_texts()
    assert ascending == sorted(ascending) and len(ascending) > 10
    config.locator("th").first.click()
    assert keys.all_inner_texts() == ascending[::-1]
    page.unroute("http*://**")
