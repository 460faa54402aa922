// The nslm explorer page's script (nslm.pages.explorer_page): calls /api/runs/NAME/* and draws
// the answers. Plain JavaScript, no libraries, so the page works offline.
const RUNS = JSON.parse(document.getElementById("runs-data").textContent);
const $ = (id) => document.getElementById(id);
const pct = (p) => (100 * p).toFixed(p < 0.001 ? 4 : 2) + "%";
function run() { return $("run").value; }
function kind() { return RUNS.find((r) => r.name === run()).kind; }
async function call(path, body, out) {
  out.innerHTML = "…";
  const res = await fetch(`/api/runs/${encodeURIComponent(run())}/${path}`, {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  const data = await res.json();
  if (!res.ok) {
    const msg = typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail);
    out.innerHTML = `<p class="error">${res.status}: ${escapeHtml(msg)}</p>`; return null;
  }
  return data;
}
function escapeHtml(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
}
function bars(rows, cls) {
  const top = Math.max(...rows.map((r) => r.p), 1e-12);
  return rows.map((r) => {
    let why = "";
    if (r.breakdown) {
      why = r.breakdown.filter((b) => b.p >= 0.01 * r.p).map((b) => b.as === "word" ? "as a word " + pct(b.p)
        : `${escapeHtml(b.as)}: P(class) ${pct(b.p_class)} × ${escapeHtml(b.model)} ${pct(b.p_in_class)}`).join("; ");
      why = `<div class="why">${why}</div>`;
    }
    return `<div class="bar ${cls}"><span class="label" title="${escapeHtml(r.token)}">${escapeHtml(r.token)}</span>` +
      `<span class="fill" style="width:${(200 * r.p / top).toFixed(1)}px"></span><span>${pct(r.p)}</span></div>${why}`;
  }).join("");
}
function chart(members) {
  const pts = members.filter((m) => m.value !== undefined && m.value !== null);
  if (pts.length < 2) return "";
  const xs = pts.map((m) => m.value), lo = Math.min(...xs), hi = Math.max(...xs);
  const top = Math.max(...pts.map((m) => m.p_in_class));
  const W = 480, H = 140, x = (v) => 30 + (W - 40) * (v - lo) / ((hi - lo) || 1);
  const sticks = pts.map((m) => `<line x1="${x(m.value)}" x2="${x(m.value)}" y1="${H - 20}" ` +
    `y2="${H - 20 - (H - 30) * m.p_in_class / top}" stroke="#d0694a" stroke-width="2"><title>${escapeHtml(m.token)}: ${pct(m.p_in_class)}</title></line>`).join("");
  return `<svg class="value-chart" width="${W}" height="${H}">${sticks}` +
    `<text x="30" y="${H - 5}" font-size="11">${lo}</text><text x="${W - 60}" y="${H - 5}" font-size="11">${hi}</text></svg>`;
}
function map(members) {
  const pts = members.filter((m) => m.lat !== undefined);
  if (!pts.length) return "";
  const W = 480, H = 240, top = Math.max(...pts.map((m) => m.p_in_class));
  const dots = pts.map((m) => `<circle cx="${(m.lon + 180) / 360 * W}" cy="${(90 - m.lat) / 180 * H}" ` +
    `r="${2 + 10 * Math.sqrt(m.p_in_class / top)}" fill="#d0694a" fill-opacity="0.6"><title>${escapeHtml(m.token)}: ${pct(m.p_in_class)}</title></circle>`).join("");
  return `<svg class="place-map" width="${W}" height="${H}"><line x1="0" x2="${W}" y1="${H / 2}" y2="${H / 2}" stroke="#ddd"/>${dots}</svg>`;
}
function readAs(tokens) {  // how the prompt was read: the tokens the model saw
  return tokens ? `<p class="note">read as: <span class="read-as">${escapeHtml(tokens.join(" "))}</span></p>` : "";
}
async function predict() {
  const out = $("predict-out");
  const data = await call("predict", {prompt: $("prompt").value, k: +$("k").value,
    input_format: $("input-format").value}, out);
  if (!data) return;
  if (data["Transformer+MM"]) { out.innerHTML = transformerWords(data); return; }
  let html = readAs(data.tokens);
  if (data.oov && data.oov.length) html += `<p class="note">not in the vocabulary, read as &lt;unk&gt;: ${escapeHtml(data.oov.join(" "))}</p>`;
  html += `<div class="row"><div class="col"><h3>NNLM</h3>${bars(data.nnlm, "nnlm")}</div>`;
  if (data.nslm.length) html += `<div class="col"><h3>NSLM</h3>${bars(data.nslm, "nslm")}</div>`;
  if (data.open) {  // NSLM-open: members the vocabulary never held compete too (marked *)
    const rows = data.open.top.map((r) => ({token: r.new ? `${r.token} * <${r.class}>` : r.token, p: r.p}));
    html += `<div class="col"><h3>NSLM-open</h3>${bars(rows, "nslm open")}</div>`;
  }
  html += "</div>";
  for (const c of data.classes) {
    // the micro-model's context: the previous token of its class in the prompt (paper Eq. 1)
    const prev = c.context ? `, previous: <span class="context">${escapeHtml(c.context)}</span>` : "";
    html += `<h3 class="class-head">${escapeHtml(c.class)}: P(class) ${pct(c.p_class)}, ${escapeHtml(c.model)}${prev}</h3>`;
    html += chart(c.top) + map(c.top);
    html += `<p class="note">${c.top.slice(0, 8).map((m) => escapeHtml(m.token) + " " + pct(m.p_in_class)).join(", ")}</p>`;
    if (c.gate) {  // a context-aware micro-model: the components the prompt chose
      html += `<p class="note gate">gate: ${c.gate.map((g) => escapeHtml(g.component) + " " + pct(g.weight)).join(", ")}</p>`;
    }
    if (c.shift) {  // a shifted one: the metric bins the prompt favoured
      html += `<p class="note gate">shift: ${c.shift.slice(0, 4).map((g) => escapeHtml(g.bin) + " ×" + g.factor.toFixed(2)).join(", ")}</p>`;
    }
    if (c.value_shift && c.value_shift.length) {  // and the value bins (an era, a magnitude)
      html += `<p class="note gate">value: ${c.value_shift.slice(0, 3).map((g) => escapeHtml(g.bin) + " ×" + g.factor.toFixed(2)).join(", ")}</p>`;
    }
  }
  out.innerHTML = html;
}
function transformerWords(data) {  // a Transformer run: its next words, and with micro-models
  const shares = (w) => Object.entries(w.classes).filter(([, p]) => p >= 0.01 * w.p)
    .map(([c, p]) => `&lt;${escapeHtml(c)}&gt; ${pct(p)}`).join("; ");
  const mixed = data["Transformer+MM"].map((w) => ({token: w.word, p: w.p, why: shares(w)}));
  const alone = data.Transformer.map((w) => ({token: w.word, p: w.p}));
  let html = `<p class="note">micro-models' share of the next word: ${pct(data.class_weight)}</p>`;
  html += `<div class="row"><div class="col"><h3>Transformer</h3>${bars(alone, "nnlm")}</div>`;
  html += `<div class="col"><h3>Transformer + micro-models</h3>${bars(mixed, "nslm")}`;
  html += mixed.filter((w) => w.why).map((w) => `<p class="note why">${escapeHtml(w.token)}: ${w.why}</p>`).join("");
  return html + "</div></div>";
}
function sampling(prefix) {
  const seed = $(prefix + "seed").value;
  return {temperature: +$(prefix + "temperature").value, top_k: +$(prefix + "top-k").value,
          top_p: +$(prefix + "top-p").value, seed: seed === "" ? null : +seed};
}
function marked(t) {  // a generated token's piece of the text, a class token marked (not its space)
  const [, space, word] = t.display.match(/^(\s*)([\s\S]*)$/);
  const how = t.new ? "a new member (not in the vocabulary) from its open micro-model" : "from its micro-model";
  return escapeHtml(space) + `<span class="class-token${t.new ? " new-member" : ""}" title="&lt;${escapeHtml(t.class)}&gt; ${how}">${escapeHtml(word)}${t.new ? "*" : ""}</span>`;
}
async function generate() {
  const out = $("generate-out");
  const data = await call("generate", {prompt: $("gen-prompt").value, max_tokens: +$("gen-max").value,
    input_format: $("input-format").value,
    output_format: $("gen-tokens").checked && kind() !== "transformer" ? "tokenized" : "plain",
    ...sampling("gen-")}, out);
  if (!data) return;
  if (kind() === "word-pos") {  // word/TAG pairs
    out.innerHTML = `<p>${escapeHtml(data.prompt_text)} ` + data.tokens.map((t) => escapeHtml(t.class ? `${t.token}/${t.class}` : t.token)).join(" ") + "</p>";
    return;
  }
  out.innerHTML = `<p class="continuation">${escapeHtml(data.prompt_text)}` +
    data.tokens.map((t) => t.class ? marked(t) : escapeHtml(t.display)).join("") + "</p>" +
    (data.read_as.length ? readAs(data.read_as) : "");
}
function colour(v) {
  const a = Math.min(1, Math.abs(v)), w = Math.round(255 * (1 - a));
  return v >= 0 ? `rgb(255,${w},${w})` : `rgb(${w},${w},255)`;
}
async function sampleBytes() {
  const out = $("bytes-out");
  const data = await call("bytes", {prime: $("prime").value, max_bytes: +$("bytes-max").value,
    neuron: +$("neuron").value, ...sampling("bytes-"), ablate: $("ablate").value,
    ablate_mode: $("ablate-mode").value, clamp: $("clamp").value, steer: $("steer").value,
    steer_at: $("steer-at").value, steer_scale: +$("steer-scale").value}, out);
  if (!data) return;
  out.innerHTML = data.chars.map((c) => `<span style="background:${colour(c.value)}" title="${c.value.toFixed(3)}">${escapeHtml(c.char)}</span>`).join("");
}
async function classify() {
  const out = $("sentiment-out");
  const d = await call("sentiment", {text: $("review").value}, out);
  if (!d) return;
  out.innerHTML = `<p>probe: <b class="verdict">${d.label}</b> (P(positive) ${pct(d.p_positive)}; test accuracy ${pct(d.probe_test_acc)})<br>` +
    `neuron ${d.neuron} alone: <b>${d.neuron_label}</b> (value ${d.neuron_value.toFixed(3)}; test accuracy ${pct(d.neuron_test_acc)})</p>`;
}
function showPanels() {
  const r = RUNS.find((x) => x.name === run());
  $("predict-panel").hidden = !r.can.predict;
  $("generate-panel").hidden = !r.can.generate;
  $("gen-tokens").parentElement.hidden = r.kind === "transformer";  // plain text only
  $("bytes-panel").hidden = !r.can.neurons;
  $("sentiment-panel").hidden = !r.can.sentiment;
}
$("run").addEventListener("change", showPanels);
$("predict-btn").addEventListener("click", predict);
$("generate-btn").addEventListener("click", generate);
$("bytes-btn").addEventListener("click", sampleBytes);
$("sentiment-btn").addEventListener("click", classify);
showPanels();
