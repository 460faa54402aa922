"""The explorer on a Transformer run, in a real browser (Playwright driving Debian's chromium):
the next words of the Transformer and of the mixture and the micro-models' share of the next
word; a continuation sampled from the mixture. Skipped where chromium or Playwright is
missing, except under CI."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformer_helpers import tiny_llama, write_tiny_gguf

from helpers import browser_mark, browser_page, served

pytest.importorskip("transformers")
pytest.importorskip("gguf")
pytestmark = browser_mark()


def test_next_words_of_both_models(tmp_path: Path, wt2_all) -> None:
    from nslm.micro.pipeline import fit_micro
    from nslm.micro.store import write_micro_json
    from nslm.transformer.commands import fit_transformer_run
    from nslm.transformer.run import write_config

    gguf = write_tiny_gguf(tmp_path / "tiny.gguf", tiny_llama(11))
    run_dir = tmp_path / "run"
    write_config(run_dir, checkpoint=str(gguf), window=128, stride=96, batch=4)
    _, payload = fit_micro(wt2_all, names=["year"], metrics=["diff"], pdfs=["multinomial"])
    write_micro_json(run_dir / "micro.json", payload)
    fit_transformer_run(run_dir, {"train": 600, "valid": 300}, progress=False)
    with served(run_dir) as url, browser_page() as page:
        page.goto(url)
        assert page.locator("#generate-panel").is_visible()
        assert page.locator("#gen-tokens").is_hidden()  # a Transformer run writes plain text
        page.fill("#gen-prompt", "In 1990,")
        page.fill("#gen-max", "5")
        page.click("#generate-btn")
        page.wait_for_selector("#generate-out p.continuation")
        shown = page.locator("#generate-out").inner_text()
        assert shown.startswith("In 1990,") and len(shown) > len("In 1990,")
        page.fill("#prompt", "The war began in 1914, and ended in")
        page.fill("#k", "4")
        page.click("#predict-btn")
        page.wait_for_selector(".bar.nslm")
        headings = page.locator("#predict-out h3").all_inner_texts()
        assert headings == ["Transformer", "Transformer + micro-models"]
        assert page.locator(".bar.nnlm").count() == 4 and page.locator(".bar.nslm").count() == 4
        assert "micro-models' share of the next word" in page.locator("#predict-out").inner_text()
