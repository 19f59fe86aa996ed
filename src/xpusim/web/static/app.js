// xpusim's page: a form whose state lives in the URL, the JSON API (/api/openapi.json),
// and tables and SVG charts drawn here. No library and nothing fetched from outside.
"use strict";

const $ = (id) => document.getElementById(id);
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
                 "#e377c2", "#7f7f7f", "#bcbd22"];
const DEFAULT = { m: "llama-2-7b", t: "mtia-v1,tpu-v4,groq-lpu:64,h100-sxm", p: "int8",
                  b: "1", pr: "128", g: "128", mode: "inference" };
let catalog = { chips: [], systems: [] }, models = [], lastCompare = null;

// ---------- numbers ----------
const PREFIXES = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""],
                  [1e-3, "m"], [1e-6, "µ"], [1e-9, "n"]];
function num(v) { return Number(v.toPrecision(3)).toLocaleString("en-US"); }
function si(v, unit) {
  if (v === null || v === undefined) return "—";
  if (v === 0) return `0 ${unit}`;
  for (const [scale, prefix] of PREFIXES) {
    if (Math.abs(v) >= scale) return `${num(v / scale)} ${prefix}${unit}`;
  }
  return `${v.toExponential(2)} ${unit}`;
}
const plain = (v) => (v === null || v === undefined ? "—" : num(v));

// ---------- the URL is the state ----------
function state() {
  const q = new URLSearchParams(location.search);
  const s = { ...DEFAULT };
  for (const [k, v] of q) s[k] = v;
  if (q.has("c")) delete s.m;
  return s;
}
function setState(changes, run = true) {
  const s = { ...state(), ...changes };
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(s)) if (v !== undefined && v !== null && v !== "") q.set(k, v);
  history.replaceState(null, "", `${location.pathname}?${q}`);
  if (run) compare();
}
const b64 = {
  encode: (text) => btoa(unescape(encodeURIComponent(text))).replace(/\+/g, "-").replace(/\//g, "_"),
  decode: (text) => decodeURIComponent(escape(atob(text.replace(/-/g, "+").replace(/_/g, "/")))),
};
function targetsOf(s) {
  return (s.t || "").split(",").filter(Boolean).map((item) => {
    const [chip, chips] = item.split(":");
    return chips ? { chip, chips: Number(chips) } : { chip };
  });
}
function modelSource(s) {
  if (s.c) {
    try { return { config: JSON.parse(b64.decode(s.c)) }; }
    catch (e) { return { config: "not JSON" }; }
  }
  return { model: s.m };
}
function isTransformer(s) {
  if (s.c) return !modelSource(s).config?._xpusim;
  const entry = models.find((m) => m.id === s.m);
  return !entry || entry.kind === "TransformerConfig";
}
function intOrText(text) { return /^\d+$/.test(text) ? Number(text) : text; }
function runOptions(s) {
  const o = { batch: intOrText(s.b) };
  if (isTransformer(s)) { o.prompt = intOrText(s.pr); o.gen = intOrText(s.g); o.mode = s.mode; }
  if (s.p) o.precision = s.p;
  return o;
}

// ---------- talking to the server ----------
async function api(path, body) {
  const init = body === undefined ? {} : {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  };
  const response = await fetch(path, init);
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}
function showError(message) {
  $("error").textContent = message ? `error: ${message}` : "";
  $("error").hidden = !message;
}
function busy(text) { $("status").textContent = text || ""; }

// ---------- the form ----------
function option(value, label, selected) {
  const o = document.createElement("option");
  o.value = value; o.textContent = label; o.selected = selected;
  return o;
}
function targetChoices() {
  return [...catalog.chips.map((c) => [c.id, `${c.id} (${c.name})`]),
          ...catalog.systems.map((s) => [s.id, `${s.id} (system, ${s.chips} × ${s.chip})`])];
}
function drawForm() {
  const s = state();
  $("model").replaceChildren(...models.map((m) => option(m.id, m.id, m.id === s.m)));
  if (s.c) { $("paste").open = true; $("config").value = modelSource(s).config === "not JSON" ? "" : JSON.stringify(modelSource(s).config, null, 1); }
  $("mode").value = s.mode;
  $("precision").value = s.p || "";
  $("batch").value = s.b; $("prompt").value = s.pr; $("gen").value = s.g;
  for (const field of ["prompt", "gen", "mode"]) $(field).disabled = !isTransformer(s);
  const rows = targetsOf(s).map((t, i) => {
    const row = document.createElement("div");
    row.className = "target";
    const select = document.createElement("select");
    select.name = `target-${i}`;
    select.setAttribute("aria-label", `chip ${i + 1}`);
    let known = false;
    for (const [id, label] of targetChoices()) { select.append(option(id, label, id === t.chip)); known ||= id === t.chip; }
    if (!known) select.append(option(t.chip, `${t.chip} (unknown)`, true));
    const count = document.createElement("input");
    count.type = "number"; count.min = "1"; count.placeholder = "chips";
    count.value = t.chips || ""; count.setAttribute("aria-label", `chips of ${i + 1}`);
    const remove = document.createElement("button");
    remove.type = "button"; remove.textContent = "×"; remove.title = "remove";
    select.onchange = count.onchange = () => writeTargets();
    remove.onclick = () => { row.remove(); writeTargets(); };
    row.append(select, " × ", count, " ", remove);
    return row;
  });
  $("targets").replaceChildren(...rows);
}
function writeTargets() {
  const items = [...$("targets").querySelectorAll(".target")].map((row) => {
    const chip = row.querySelector("select").value, chips = row.querySelector("input").value;
    return chips ? `${chip}:${chips}` : chip;
  });
  setState({ t: items.join(",") });
}
function wireForm() {
  $("model").onchange = () => { setState({ m: $("model").value, c: "" }); drawForm(); };
  $("mode").onchange = () => setState({ mode: $("mode").value });
  $("precision").onchange = () => setState({ p: $("precision").value });
  for (const [id, key] of [["batch", "b"], ["prompt", "pr"], ["gen", "g"]]) {
    $(id).onchange = () => setState({ [key]: $(id).value });
  }
  $("add-target").onclick = () => {
    const s = state();
    setState({ t: [s.t, "h100-sxm"].filter(Boolean).join(",") });
    drawForm();
  };
  $("use-config").onclick = () => {
    let parsed;
    try { parsed = JSON.parse($("config").value); }
    catch (e) { showError(`the pasted config is not JSON: ${e.message}`); return; }
    setState({ c: b64.encode(JSON.stringify(parsed)) });
    drawForm();
  };
  $("clear-config").onclick = () => { $("config").value = ""; setState({ c: "" }); drawForm(); };
  $("sweep-form").onsubmit = (e) => {
    e.preventDefault();
    setState({ sb: $("sweep-batch").value, sp: $("sweep-prompt").value, sg: $("sweep-gen").value }, false);
    sweep();
  };
  $("plan-form").onsubmit = (e) => {
    e.preventDefault();
    setState(Object.fromEntries(PLAN_FIELDS.map(([key, id]) => [key, $(id).value])), false);
    plan();
  };
  $("serve-form").onsubmit = (e) => {
    e.preventDefault();
    setState({ sl: $("serve-loads").value, sr: $("serve-requests").value,
               spr: $("serve-prompt").value, sgn: $("serve-gen").value,
               se: $("serve-engine").value, ssp: $("serve-speculative").value,
               sdt: $("serve-draft-tokens").value, sac: $("serve-acceptance").value }, false);
    serve();
  };
  $("validate-form").onsubmit = (e) => {
    e.preventDefault();
    setState({ v: $("validate-chip").value }, false);
    validate();
  };
}

// ---------- the comparison ----------
const COLUMNS = [
  ["TTFT", "ttft_s", (v) => si(v, "s")],
  ["TPOT", "tpot_s", (v) => si(v, "s")],
  ["step time", "step_time_s", (v) => si(v, "s")],
  ["latency", "latency_s", (v) => si(v, "s")],
  ["tok/s/user", "tokens_per_s_per_user", plain],
  ["tok/s", "tokens_per_s", plain],
  ["queries/s", "queries_per_s", plain],
  ["MFU", "mfu", (v) => (v == null ? "—" : `${(100 * v).toFixed(1)}%`)],
  ["J/token", "joules_per_token", plain],
  ["J/query", "joules_per_query", (v) => si(v, "J")],
  ["power/chip", "avg_power_w", (v) => si(v, "W")],
  ["$/M", "cost", (v) => (v ? `$${num(v.usd_per_million)}` : "—")],
  ["bound by", "bottleneck", (v) => v || "—"],
];
function chipTitle(card) {
  const lines = [`${card.name} (${card.vendor}, ${card.year}, ${card.process})`];
  const add = (label, f, unit) => { if (f) lines.push(`${label}: ${si(f.value, unit)} — ${f.confidence}; ${f.source}`); };
  for (const [dtype, f] of Object.entries(card.peak_ops_per_s)) add(`${dtype} peak`, f, "OP/s");
  for (const m of card.memory) add(`${m.name} bandwidth`, m.bandwidth_bytes_per_s, "B/s");
  add("TDP", card.tdp_w, "W");
  return lines.join("\n");
}
function cell(text, title, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (title) td.title = title;
  if (cls) td.className = cls;
  return td;
}
function fitsText(r) {
  if (r.fits) return "yes";
  return r.min_chips ? `no: needs ${r.min_chips}+ chips` : `no: ${r.reason}`;
}
function drawResults(entries) {
  const ok = entries.filter((e) => e.result).map((e) => e.result);
  const columns = COLUMNS.filter(([, key]) => ok.some((r) => r[key] !== undefined && r[key] !== null));
  const head = document.createElement("tr");
  for (const label of ["chip", "chips", "precision", "fits", ...columns.map((c) => c[0])]) {
    const th = document.createElement("th"); th.textContent = label; head.append(th);
  }
  $("results").tHead.replaceChildren(head);
  const rows = entries.map((e) => {
    const tr = document.createElement("tr");
    if (e.error) {
      tr.append(cell(e.target), cell(e.error, null, "err"));
      tr.lastChild.colSpan = 3 + columns.length;
      return tr;
    }
    const r = e.result;
    tr.append(cell(r.system && r.system !== r.chip && !r.system.startsWith(`${r.chip}-over`) ? r.system : r.chip, chipTitle(e.chip)),
              cell(String(r.chips)), cell(r.precision), cell(fitsText(r)));
    for (const [, key, format] of columns) {
      tr.append(cell(r.fits || key === "bottleneck" ? format(r[key]) : "—", key === "cost" && r.cost ? r.cost.source : null));
    }
    return tr;
  });
  $("results").tBodies[0].replaceChildren(...rows);
  const notes = entries.flatMap((e) => (e.result ? e.result.notes.map((n) => `${e.result.chip}: ${n}`) : []));
  $("notes").replaceChildren(...notes.map((n) => { const li = document.createElement("li"); li.textContent = n; return li; }));
}
function drawFigures(entries) {
  const cards = [...new Map(entries.filter((e) => e.chip).map((e) => [e.chip.id, e.chip])).values()];
  const head = document.createElement("tr");
  head.append(...["figure", ...cards.map((c) => c.id)].map((t) => { const th = document.createElement("th"); th.textContent = t; return th; }));
  $("figures").tHead.replaceChildren(head);
  const rows = [];
  const row = (label, pick, unit, named) => {
    const tr = document.createElement("tr");
    tr.append(cell(label));
    for (const card of cards) {
      const [f, name] = [pick(card), named ? named(card) : ""];
      const text = f ? `${si(f.value, unit)}${name ? ` ${name}` : ""}` : "—";
      tr.append(f ? cell(text, `${f.source}\nconfidence: ${f.confidence}${f.note ? `\n${f.note}` : ""}`, `conf-${f.confidence}`) : cell(text));
    }
    rows.push(tr);
  };
  const dtypes = [...new Set(cards.flatMap((c) => Object.keys(c.peak_ops_per_s)))];
  for (const d of dtypes) row(`${d} peak`, (c) => c.peak_ops_per_s[d], "OP/s");
  // memories from the outermost (the largest) in: a chip's levels are listed innermost first
  const levels = Math.max(...cards.map((c) => c.memory.length));
  for (let i = 0; i < levels; i++) {
    const level = (c) => c.memory[c.memory.length - 1 - i];
    const where = i === 0 ? "outermost memory" : `memory ${i + 1} from outside`;
    row(`${where}: capacity`, (c) => level(c)?.capacity_bytes, "B", (c) => level(c)?.name);
    row(`${where}: bandwidth`, (c) => level(c)?.bandwidth_bytes_per_s, "B/s");
  }
  row("TDP", (c) => c.tdp_w, "W");
  row("chip-to-chip link", (c) => c.chip_to_chip?.bandwidth_bytes_per_s, "B/s");
  $("figures").tBodies[0].replaceChildren(...rows);
}

// ---------- SVG ----------
const NS = "http://www.w3.org/2000/svg";
function svgEl(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function logScale(lo, hi, a, b) {
  const l0 = Math.log10(lo), l1 = Math.log10(hi);
  return (v) => a + ((Math.log10(v) - l0) / (l1 - l0 || 1)) * (b - a);
}
function decades(lo, hi) {
  const out = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) out.push(10 ** e);
  return out.filter((v) => v >= lo && v <= hi);
}
function logPlot({ title, xs, ys, xLabel, yLabel, width = 420, height = 300 }) {
  const svg = svgEl("svg", { width, height, role: "img", "aria-label": title });
  const m = { l: 58, r: 12, t: 22, b: 38 };
  const [x0, x1] = [Math.min(...xs) / 2, Math.max(...xs) * 2];
  const [y0, y1] = [Math.min(...ys) / 2, Math.max(...ys) * 2];
  const x = logScale(x0, x1, m.l, width - m.r), y = logScale(y0, y1, height - m.b, m.t);
  svg.append(svgEl("text", { x: m.l, y: 14, "font-weight": "600" }, title));
  for (const v of decades(x0, x1)) {
    svg.append(svgEl("line", { x1: x(v), x2: x(v), y1: m.t, y2: height - m.b, class: "grid" }));
    svg.append(svgEl("text", { x: x(v), y: height - m.b + 14, "text-anchor": "middle" }, si(v, "")));
  }
  for (const v of decades(y0, y1)) {
    svg.append(svgEl("line", { x1: m.l, x2: width - m.r, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(svgEl("text", { x: m.l - 4, y: y(v) + 4, "text-anchor": "end" }, si(v, "")));
  }
  svg.append(svgEl("text", { x: (m.l + width - m.r) / 2, y: height - 6, "text-anchor": "middle" }, xLabel));
  svg.append(svgEl("text", { x: 12, y: (m.t + height - m.b) / 2, transform: `rotate(-90 12 ${(m.t + height - m.b) / 2})`, "text-anchor": "middle" }, yLabel));
  return { svg, x, y, x0, x1, y0, y1 };
}
function legend(svg, items, x, y) {
  items.forEach(([label, color], i) => {
    svg.append(svgEl("rect", { x, y: y + i * 14 - 8, width: 10, height: 10, fill: color }));
    svg.append(svgEl("text", { x: x + 14, y: y + i * 14 }, label));
  });
}

function drawBreakdown(entries) {
  const bars = [];
  for (const e of entries) {
    if (!e.result?.ops?.length || !e.result.fits) continue;
    const phases = {};
    for (const op of e.result.ops) {
      (phases[op.phase] ||= {})[op.kind] = ((phases[op.phase] || {})[op.kind] || 0) + op.share;
    }
    for (const [phase, kinds] of Object.entries(phases)) bars.push([`${e.result.chip}: ${phase}`, kinds]);
  }
  const kinds = [...new Set(bars.flatMap(([, k]) => Object.keys(k)))].sort();
  const width = 760, rowH = 22, height = 30 + bars.length * rowH + 16 * Math.ceil(kinds.length / 4);
  const svg = svgEl("svg", { width, height, role: "img", "aria-label": "time by op kind" });
  const left = 190, right = width - 20;
  bars.forEach(([label, shares], i) => {
    const y = 10 + i * rowH;
    svg.append(svgEl("text", { x: left - 6, y: y + 14, "text-anchor": "end" }, label));
    const total = Object.values(shares).reduce((a, b) => a + b, 0) || 1;
    let at = left;
    kinds.forEach((kind, k) => {
      const w = ((shares[kind] || 0) / total) * (right - left);
      if (w > 0) {
        const rect = svgEl("rect", { x: at, y, width: w, height: rowH - 6, fill: PALETTE[k % PALETTE.length] });
        rect.append(svgEl("title", {}, `${kind}: ${(100 * (shares[kind] || 0) / total).toFixed(1)}%`));
        svg.append(rect);
      }
      at += w;
    });
  });
  kinds.forEach((kind, k) => {
    const col = k % 4, line = Math.floor(k / 4);
    const x = left + col * 140, y = 24 + bars.length * rowH + line * 16;
    svg.append(svgEl("rect", { x, y: y - 9, width: 10, height: 10, fill: PALETTE[k % PALETTE.length] }));
    svg.append(svgEl("text", { x: x + 14, y }, kind));
  });
  $("breakdown").replaceChildren(bars.length ? svg : "no per-op report for these results");
}

function drawMemory(entries) {
  const parts = [["weights", "#1f77b4"], ["kv_cache", "#ff7f0e"], ["activations", "#2ca02c"],
                 ["gradients", "#9467bd"], ["optimizer_state", "#8c564b"], ["stash", "#e377c2"]];
  const shown = entries.filter((e) => e.result?.per_chip_memory_bytes);
  const width = 760, rowH = 24, left = 190, right = width - 150;
  const svg = svgEl("svg", { width, height: 80 + shown.length * rowH, role: "img", "aria-label": "memory per chip" });
  shown.forEach((e, i) => {
    const mem = e.result.per_chip_memory_bytes, y = 10 + i * rowH;
    const scale = Math.max(mem.total, mem.capacity);
    svg.append(svgEl("text", { x: left - 6, y: y + 14, "text-anchor": "end" }, `${e.result.chip} × ${e.result.chips}`));
    let at = left;
    for (const [part, color] of parts) {
      if (!mem[part]) continue;
      const w = (mem[part] / scale) * (right - left);
      const rect = svgEl("rect", { x: at, y, width: w, height: rowH - 8, fill: color });
      rect.append(svgEl("title", {}, `${part}: ${si(mem[part], "B")}`));
      svg.append(rect);
      at += w;
    }
    const cap = left + (mem.capacity / scale) * (right - left);
    svg.append(svgEl("line", { x1: cap, x2: cap, y1: y - 2, y2: y + rowH - 6, stroke: "black", "stroke-width": 2 }));
    svg.append(svgEl("text", { x: right + 6, y: y + 14 }, `${si(mem.total, "B")} of ${si(mem.capacity, "B")}`));
  });
  legend(svg, parts.slice(0, 3), left, 26 + shown.length * rowH);
  $("memory").replaceChildren(svg);
}

function drawRooflines(entries) {
  const charts = [];
  for (const e of entries) {
    const ops = (e.result?.ops || []).filter((o) => o.flops > 0 && o.bytes > 0 && o.time_s > 0);
    if (!ops.length || !e.roofs?.peak_ops_per_s) continue;
    const peak = e.roofs.peak_ops_per_s;
    const xs = ops.map((o) => o.flops / o.bytes), ys = ops.map((o) => o.flops / o.time_s);
    const p = logPlot({ title: `${e.result.chip} (${e.roofs.precision})`, xs, ys: [...ys, peak],
                        xLabel: "FLOPs per byte", yLabel: "attained FLOP/s" });
    p.svg.append(svgEl("line", { x1: p.x(p.x0), x2: p.x(p.x1), y1: p.y(peak), y2: p.y(peak), stroke: "black" }));
    e.roofs.memory.forEach((m, i) => {
      const knee = Math.min(peak / m.bandwidth_bytes_per_s, p.x1);
      const from = Math.max(p.x0, p.y0 / m.bandwidth_bytes_per_s);
      p.svg.append(svgEl("line", { x1: p.x(from), y1: p.y(from * m.bandwidth_bytes_per_s), x2: p.x(knee), y2: p.y(knee * m.bandwidth_bytes_per_s), stroke: PALETTE[(i + 4) % PALETTE.length], "stroke-dasharray": "4 3" }));
    });
    ops.forEach((o, i) => {
      const dot = svgEl("circle", { cx: p.x(xs[i]), cy: p.y(ys[i]), r: 3.5, fill: o.phase === "decode" ? "#d62728" : "#1f77b4" });
      dot.append(svgEl("title", {}, `${o.phase} ${o.name}: ${si(ys[i], "FLOP/s")} at ${num(xs[i])} FLOPs/B, bound by ${o.bottleneck}`));
      p.svg.append(dot);
    });
    legend(p.svg, [["prefill ops", "#1f77b4"], ["decode ops", "#d62728"], ...e.roofs.memory.map((m, i) => [m.name, PALETTE[(i + 4) % PALETTE.length]])], 66, 36);
    charts.push(p.svg);
  }
  $("roofline").replaceChildren(...(charts.length ? charts : ["no per-op report for these results"]));
}

// Answers can come back out of order (a change made while the page's first answer is still
// on its way): only the latest request's answer is drawn, and only it clears the status.
let compareSent = 0;
async function compare() {
  const s = state();
  const body = { ...modelSource(s), targets: targetsOf(s), options: runOptions(s) };
  const mine = ++compareSent;
  busy("simulating…");
  try {
    const data = await api("/api/compare", body);
    if (mine !== compareSent) return;
    showError("");
    lastCompare = data.results;
    drawResults(data.results); drawFigures(data.results); drawBreakdown(data.results);
    drawMemory(data.results); drawRooflines(data.results);
  } catch (e) {
    if (mine === compareSent) showError(e.message);
  } finally {
    if (mine === compareSent) busy("");
  }
}

// ---------- sweep ----------
const list = (text) => text.split(",").map((t) => t.trim()).filter(Boolean).map(intOrText);
async function sweep() {
  const s = state();
  const axes = { batch: list(s.sb || $("sweep-batch").value) };
  if (isTransformer(s)) { axes.prompt = list(s.sp || "128"); axes.gen = list(s.sg || "128"); }
  if (s.p) axes.precision = [s.p];
  busy("sweeping…");
  try {
    const data = await api("/api/sweep", { ...modelSource(s), targets: targetsOf(s), axes });
    showError("");
    const [ox, oy] = data.objectives;
    const usable = data.points.filter((p) => p.fits && p[ox.column] > 0 && p[oy.column] > 0);
    if (!usable.length) { $("sweep").replaceChildren("no point of this sweep fits"); return; }
    const p = logPlot({ title: "every point, and each target's front", xs: usable.map((q) => q[ox.column]), ys: usable.map((q) => q[oy.column]), xLabel: ox.label, yLabel: oy.label, width: 760, height: 380 });
    const names = Object.keys(data.fronts);
    names.forEach((name, k) => {
      const color = PALETTE[k % PALETTE.length];
      const front = data.fronts[name].map((i) => data.points[i]);
      const d = front.map((q, i) => `${i ? "L" : "M"}${p.x(q[ox.column])},${p.y(q[oy.column])}`).join("");
      if (d) p.svg.append(svgEl("path", { d, fill: "none", stroke: color, "stroke-width": 2 }));
      data.points.forEach((q) => {
        const label = q.options.chips ? `${q.target} x${q.options.chips}` : q.target;
        if (label !== name || !usable.includes(q)) return;
        const dot = svgEl("circle", { cx: p.x(q[ox.column]), cy: p.y(q[oy.column]), r: 3, fill: color, "fill-opacity": 0.5 });
        dot.append(svgEl("title", {}, `${name}: ${q.label}: ${num(q[ox.column])}, ${num(q[oy.column])}`));
        p.svg.append(dot);
      });
    });
    legend(p.svg, names.map((n, k) => [n, PALETTE[k % PALETTE.length]]), 600, 40);
    $("sweep").replaceChildren(p.svg);
  } catch (e) {
    showError(e.message);
  } finally {
    busy("");
  }
}

// ---------- serving ----------
async function serve() {
  const s = state();
  const loads = list(s.sl || $("serve-loads").value), targets = targetsOf(s);
  const base = { requests: intOrText(s.sr || "200"), prompt: intOrText(s.spr || "1024"), gen: intOrText(s.sgn || "128") };
  if (s.p) base.precision = s.p;
  if (s.se) base.engine = s.se;
  if (s.ssp) {  // speculative decoding: the serve options of the same names
    base.speculative = s.ssp;
    if (s.sdt) base.draft_tokens = intOrText(s.sdt);
    if (s.sac) base.acceptance = Number(s.sac);
  }
  busy("serving…");
  try {
    const runs = await Promise.all(targets.flatMap((target) => loads.map((c) =>
      api("/api/serve", { ...modelSource(s), target, options: { ...base, concurrency: c } })
        .then((r) => ({ target, c, r: r.result }), (e) => ({ target, c, error: e.message })))));
    const failed = runs.find((x) => x.error);
    showError(failed ? `${failed.target.chip}: ${failed.error}` : "");
    const charts = [["TTFT", "ttft_s"], ["TPOT", "tpot_s"]].map(([name, key]) => {
      const ok = runs.filter((x) => x.r?.fits && x.r[key]);
      if (!ok.length) return `no ${name}: nothing served`;
      const p = logPlot({ title: `${name}: p50 (dashed) and p99 against clients`, xs: ok.map((x) => x.c), ys: ok.flatMap((x) => [x.r[key].p50, x.r[key].p99]), xLabel: "concurrent clients", yLabel: `${name} (s)` });
      targets.forEach((t, k) => {
        const mine = ok.filter((x) => x.target === t);
        for (const [pct, dash] of [["p99", ""], ["p50", "4 3"]]) {
          const d = mine.map((x, i) => `${i ? "L" : "M"}${p.x(x.c)},${p.y(x.r[key][pct])}`).join("");
          if (d) p.svg.append(svgEl("path", { d, fill: "none", stroke: PALETTE[k % PALETTE.length], "stroke-width": 2, "stroke-dasharray": dash }));
        }
      });
      legend(p.svg, targets.map((t, k) => [t.chips ? `${t.chip} x${t.chips}` : t.chip, PALETTE[k % PALETTE.length]]), 300, 40);
      return p.svg;
    });
    $("serving").replaceChildren(...charts);
  } finally {
    busy("");
  }
}

// ---------- plan ----------
const PLAN_FIELDS = [["plk", "plan-load-kind"], ["pl", "plan-load"], ["pck", "plan-count-kind"],
                     ["pc", "plan-chips"], ["ppr", "plan-prompt"], ["pgn", "plan-gen"],
                     ["ptt", "plan-ttft"], ["ptp", "plan-tpot"], ["prq", "plan-requests"]];
function planTable(data) {
  const table = document.createElement("table");
  const head = document.createElement("tr");
  head.append(...["chip", "best configuration", "p99 TTFT", "p99 TPOT", "SLO met", "tok/s/chip",
                  "tok/s/user", "$/M", "$/M goodput", "others lost"].map((t) => {
    const th = document.createElement("th"); th.textContent = t; return th;
  }));
  table.append(head);
  for (const p of data.chips) {
    const tr = document.createElement("tr"), b = p.best;
    const lost = {}, bestKey = b && JSON.stringify(b.config);
    for (const o of p.outcomes) if (JSON.stringify(o.config) !== bestKey) lost[o.status] = (lost[o.status] || 0) + 1;
    const why = Object.entries(lost).map(([k, n]) => `${n} ${k}`).join(", ");
    if (!b) {
      tr.append(cell(p.chip), cell("none meets both"), ...Array(7).fill(0).map(() => cell("—")), cell(why));
    } else {
      tr.append(cell(p.chip), cell(b.config.layout ? planLabel(b.config) : ""), cell(si(b.ttft_p99_ms / 1e3, "s")),
                cell(si(b.tpot_p99_ms / 1e3, "s")), cell(`${(100 * b.slo_met).toFixed(0)}%`),
                cell(plain(b.tokens_per_s_per_chip)), cell(plain(b.tokens_per_s_per_user)),
                cell(b.usd_per_million == null ? "—" : `$${num(b.usd_per_million)}`),
                cell(b.usd_per_million_goodput == null ? "—" : `$${num(b.usd_per_million_goodput)}`,
                     "dollars per million tokens of requests within both objectives"), cell(why));
    }
    table.append(tr);
  }
  return table;
}
function sidePlan(p) {  // planning/space.py ReplicaPlan.label
  return `tp${p.tp}${p.pp > 1 ? ` pp${p.pp}` : ""}${p.ep > 1 ? ` ep${p.ep}` : ""}${p.dp_attention ? " dpa" : ""}`;
}
function planLabel(c, withChip = false) {  // planning/space.py Layout.label and Config.label
  const l = c.layout, k = c.knobs;
  const plan = l.decode == null ? `${sidePlan(l.plan)} x${l.replicas}`
    : `${l.prefill_replicas}P ${sidePlan(l.plan)} + ${l.decode_replicas}D ${sidePlan(l.decode)}`;
  return `${c.chips}x ${withChip ? `${c.chip} ` : ""}${plan} ${c.precision} ${k.engine} batch ${k.max_batch} chunk ${k.token_budget}${k.mtp ? " mtp" : ""}`;
}
function planFront(data) {
  const rows = data.front.filter((r) => r.tokens_per_s_per_user > 0 && r.tokens_per_s_per_chip > 0);
  if (!rows.length) return document.createTextNode("no configuration was simulated: nothing to draw");
  const slo = 1e3 / data.slo_tpot_ms;
  const p = logPlot({ title: "front: tokens/s per chip against tokens/s per user (dashed: the TPOT objective)",
                      xs: [...rows.map((r) => r.tokens_per_s_per_user), slo], ys: rows.map((r) => r.tokens_per_s_per_chip),
                      xLabel: "output tokens/s per user", yLabel: "output tokens/s per chip", width: 760, height: 380 });
  p.svg.append(svgEl("line", { x1: p.x(slo), x2: p.x(slo), y1: 22, y2: 380 - 38, stroke: "#555", "stroke-dasharray": "6 4" }));
  const chips = [...new Set(rows.map((r) => r.chip))];
  chips.forEach((chip, k) => {
    const color = PALETTE[k % PALETTE.length], mine = rows.filter((r) => r.chip === chip);
    const d = mine.map((r, i) => `${i ? "L" : "M"}${p.x(r.tokens_per_s_per_user)},${p.y(r.tokens_per_s_per_chip)}`).join("");
    p.svg.append(svgEl("path", { d, fill: "none", stroke: color, "stroke-width": 2 }));
    for (const r of mine) {
      const dot = svgEl("circle", { cx: p.x(r.tokens_per_s_per_user), cy: p.y(r.tokens_per_s_per_chip), r: 4,
                                    fill: r.meets ? color : "white", stroke: color });
      dot.append(svgEl("title", {}, `${r.configuration}: ${num(r.tokens_per_s_per_user)} tok/s/user, ${num(r.tokens_per_s_per_chip)} tok/s/chip${r.meets ? "" : " (misses an objective)"}`));
      p.svg.append(dot);
    }
  });
  legend(p.svg, chips.map((c, k) => [c, PALETTE[k % PALETTE.length]]), 600, 40);
  return p.svg;
}
async function plan() {
  const s = state();
  const options = { [s.plk || "concurrency"]: Number(s.pl || 16), [s.pck || "num_chips"]: intOrText(s.pc || "2"),
                    prompt: intOrText(s.ppr || "1024"), gen: intOrText(s.pgn || "128"),
                    slo_ttft_ms: Number(s.ptt || 1000), slo_tpot_ms: Number(s.ptp || 50),
                    requests: intOrText(s.prq || "200") };
  if (options.concurrency !== undefined) options.concurrency = Math.round(options.concurrency);
  const chips = [...new Set(targetsOf(s).map((t) => t.chip))];
  busy("planning…");
  try {
    const data = await api("/api/plan", { ...modelSource(s), chips, options });
    showError("");
    const summary = document.createElement("p");
    summary.textContent = data.best
      ? `best: ${planLabel(data.best.config, true)} at $${num(data.best.usd_per_million_goodput)} per million goodput tokens ($${num(data.best.usd_per_million)} per million tokens)`
      : `no configuration meets both objectives; binding: ${data.binding}`;
    const decisions = document.createElement("ul");
    decisions.append(...data.decisions.map((d) => { const li = document.createElement("li"); li.textContent = d; return li; }));
    const counts = document.createElement("p");
    counts.textContent = `${data.costed} configurations costed, ${data.simulated} simulated, ${data.seconds.toFixed(1)} s`;
    $("plan").replaceChildren(summary, decisions, planTable(data), planFront(data), counts);
  } catch (e) {
    showError(e.message);
  } finally {
    busy("");
  }
}

// ---------- validation ----------
async function validate() {
  const chip = state().v || $("validate-chip").value;
  const url = `/api/validate?chip=${encodeURIComponent(chip)}`;
  try {
    for (;;) {
      const response = await fetch(url);
      const data = await response.json();
      if (response.status === 202) { busy(`validating ${chip}: ${data.done} of ${data.total} points…`); await new Promise((r) => setTimeout(r, 1000)); continue; }
      if (!response.ok) throw new Error(data.error);
      showError("");
      const table = document.createElement("table");
      const head = document.createElement("tr");
      head.append(...["point", "metric", "measured", "predicted", "error", "bound by"].map((t) => { const th = document.createElement("th"); th.textContent = t; return th; }));
      table.append(head);
      for (const p of data.points) {
        const tr = document.createElement("tr");
        tr.append(cell(p.id, p.source), cell(p.metric), cell(num(p.measured)), cell(num(p.predicted)), cell(`${p.ratio > 1 ? "+" : "-"}${(100 * p.ape).toFixed(0)}%`), cell(p.bottleneck));
        table.append(tr);
      }
      const summary = document.createElement("p");
      summary.textContent = `${chip}: median error ${(100 * data.median_ape).toFixed(1)}% over ${data.n_points} points; ${data.n_skipped} not expressible yet`;
      $("validation").replaceChildren(summary, table);
      return;
    }
  } catch (e) {
    showError(e.message);
  } finally {
    busy("");
  }
}

// ---------- start ----------
async function start() {
  wireForm();
  try {
    [catalog, { models }] = await Promise.all([api("/api/chips"), api("/api/models")]);
  } catch (e) {
    showError(`the server did not answer: ${e.message}`);
    return;
  }
  for (const p of ["nvfp4", "mxfp4", "int8", "fp8", "bf16", "fp16", "fp32"]) $("precision").append(option(p, p, false));
  $("validate-chip").replaceChildren(...catalog.chips.map((c) => option(c.id, c.id, c.id === (state().v || "tpu-v4"))));
  const s = state();
  if (s.sb) $("sweep-batch").value = s.sb;
  if (s.sp) $("sweep-prompt").value = s.sp;
  if (s.sg) $("sweep-gen").value = s.sg;
  if (s.sl) $("serve-loads").value = s.sl;
  if (s.sr) $("serve-requests").value = s.sr;
  if (s.spr) $("serve-prompt").value = s.spr;
  if (s.sgn) $("serve-gen").value = s.sgn;
  if (s.se) $("serve-engine").value = s.se;
  if (s.ssp) $("serve-speculative").value = s.ssp;
  if (s.sdt) $("serve-draft-tokens").value = s.sdt;
  if (s.sac) $("serve-acceptance").value = s.sac;
  for (const [key, id] of PLAN_FIELDS) if (s[key]) $(id).value = s[key];
  drawForm();
  await compare();
  if (s.sb) await sweep();
  if (s.sl) await serve();
  if (s.ptt) await plan();
  if (s.v) await validate();
}
start();
