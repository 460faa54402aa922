"""The explorer's one page: forms for the API, drawn with plain JavaScript (no CDN, no build).

Next token: NNLM and NSLM top-k as bars, each NSLM token with its class × micro-model
breakdown; per class its members as a chart (numbers by value, e.g. years) or a map (places
by longitude and latitude). The prompts are plain text (a select says they are already in
the corpus's tokens), and each answer shows the tokens a prompt was read as. Generate: the
continuation as plain text (a checkbox shows the model's tokens instead), the class tokens
from micro-models marked in either. Byte LM:
a sample coloured by a neuron (red +1, blue −1, as ``nslm generate --neuron``), and a review
classified by the sentiment probe and its single neuron.
"""

from __future__ import annotations

import json
from importlib.resources import files

from nslm.pages.html import STYLE, esc

PAGE_STYLE = (
    STYLE
    + """
.panel { border: 1px solid #ddd; border-radius: 6px; padding: 0.8em 1.2em; margin: 1em 0; }
.panel h2 { margin-top: 0.2em; }
.row { display: flex; gap: 2em; flex-wrap: wrap; } .col { flex: 1; min-width: 300px; }
.bar { display: flex; align-items: center; gap: 0.5em; margin: 2px 0; font-size: 0.92em; }
.bar .fill { background: #4a7bd0; height: 12px; } .bar.nslm .fill { background: #d0694a; }
.bar .label { width: 9em; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; }
.why { color: #666; font-size: 0.8em; margin: 0 0 4px 9.5em; }
.class-token { background: #fde9c9; border-radius: 3px; padding: 0 2px; }
.error { color: #b00020; } input[type=text], textarea { width: 100%; font: inherit; }
#bytes-out span { white-space: pre-wrap; font-family: monospace; }
.continuation { white-space: pre-wrap; } .read-as { font-family: monospace; }
svg { background: #fafafa; border: 1px solid #eee; }
"""
)


def _script() -> str:
    """The page's JavaScript, shipped beside this module (``static/explorer.js``)."""
    return (files("nslm.pages") / "static" / "explorer.js").read_text(encoding="utf-8")


def _sampling_inputs(prefix: str, max_value: int, default: int, label: str) -> str:
    return (
        f'<label>{label} <input id="{prefix}max" type="number" min="1" max="{max_value}" '
        f'value="{default}"></label> '
        f'<label>temperature <input id="{prefix}temperature" type="number" step="0.1" min="0" '
        f'value="1.0"></label> '
        f'<label>top-k <input id="{prefix}top-k" type="number" min="0" value="0"></label> '
        f'<label>top-p <input id="{prefix}top-p" type="number" step="0.05" min="0.05" max="1" '
        f'value="1.0"></label> '
        f'<label>seed <input id="{prefix}seed" type="number" value="1"></label>'
    )


def explorer_html(runs: list[dict], limits) -> str:
    """The page, with the run list embedded (the API has it too: ``/api/runs``)."""
    options = "".join(
        f'<option value="{esc(r["name"])}">{esc(r["name"])} ({esc(r["kind"])})</option>'
        for r in runs
    )
    neurons = max((r["neurons"] or 1 for r in runs), default=1)
    data = json.dumps(runs).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>nslm explorer</title>
<style>{PAGE_STYLE}</style></head><body>
<h1>nslm explorer</h1>
<p class="note">Run: <select id="run">{options}</select> · Prompts are
<select id="input-format"><option value="plain">plain text</option>
<option value="tokenized">the corpus's tokens</option></select>
· API: <a href="/docs">/docs</a></p>
<div class="panel" id="predict-panel"><h2>Next token</h2>
<input id="prompt" type="text" maxlength="{limits.max_prompt_chars}"
 value="William the Conqueror won the Battle of Hastings in 1066, and died in">
<label>k <input id="k" type="number" min="1" max="{limits.max_k}" value="10"></label>
<button id="predict-btn">Predict</button><div id="predict-out"></div></div>
<div class="panel" id="generate-panel"><h2>Generate</h2>
<input id="gen-prompt" type="text" maxlength="{limits.max_prompt_chars}" value="In 1990,">
{_sampling_inputs("gen-", limits.max_tokens, 30, "max tokens")}
<label><input id="gen-tokens" type="checkbox"> show tokens</label>
<button id="generate-btn">Generate</button><div id="generate-out"></div></div>
<div class="panel" id="bytes-panel"><h2>Byte LM: a neuron over a sample</h2>
<input id="prime" type="text" maxlength="{limits.max_prompt_chars}" value="This movie was">
<label>neuron <input id="neuron" type="number" min="0" max="{neurons - 1}" value="0"></label>
{_sampling_inputs("bytes-", limits.max_tokens, 200, "max bytes")}<br>
<label>ablate <input id="ablate" type="text" placeholder="356,12" size="8"></label>
<select id="ablate-mode"><option>zero</option><option>mean</option></select>
<label>clamp <input id="clamp" type="text" placeholder="356=1.5" size="8"></label>
<label>steer <input id="steer" type="text" placeholder="sentiment, output:0123456789"></label>
<label>at <input id="steer-at" type="text" value="hidden" size="10"></label>
<label>α <input id="steer-scale" type="number" step="0.1" value="1.0"></label>
<button id="bytes-btn">Sample</button><p id="bytes-out"></p></div>
<div class="panel" id="sentiment-panel"><h2>Byte LM: classify a review</h2>
<textarea id="review" rows="3" maxlength="{limits.max_prompt_chars}">A moving, funny and \
beautifully acted film.</textarea>
<button id="sentiment-btn">Classify</button><div id="sentiment-out"></div></div>
<script id="runs-data" type="application/json">{data}</script>
<script>{_script()}</script></body></html>
"""
