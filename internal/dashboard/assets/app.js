// Sluice dashboard: polls the JSON API every second and draws the loop's
// history on canvas. No dependencies.
"use strict";

const WINDOW = 360;          // points kept on screen
const POLL_MS = 1000;
const MANUAL_RATE = "manual_rate";

const charts = {
  cpu: { title: "CPU", series: [
    { key: "setpoint", label: "setpoint", color: "#d92d20", dash: [6, 4] },
    { key: "measured", label: "measured CPU", color: "#1570ef" } ] },
  rate: { title: "rate", series: [
    { key: "rate", label: "allowed rate", color: "#7a5af8" },
    { key: "consumed", label: "processed rate (consumers' report)", color: "#12b76a" } ] },
  terms: { title: "terms", series: [
    { key: "p", label: "P", color: "#f79009" },
    { key: "i", label: "I", color: "#0e9384" },
    { key: "ff", label: "FF", color: "#667085", dash: [4, 3] } ] },
  depth: { title: "depth", series: [
    { key: "depth", label: "queue depth / lag", color: "#c11574" } ] },
  // The consumers' inner loop (PARAMS inner_loop), shown once a point
  // carries its latency: their store latency per message against the
  // reference they learned at the setpoint, shaded while they cut; and the
  // cut itself, the rate they held back below their shares.
  latency: { title: "latency", inner: true, cutShade: true, series: [
    { key: "inner_latency_ms", label: "consumers' store latency per message", color: "#1570ef" },
    { key: "inner_reference_ms", label: "learned reference (latency at the setpoint)", color: "#d92d20", dash: [6, 4] } ] },
  cut: { title: "cut", inner: true, series: [
    { key: "withheld", label: "withheld below the allowed share by the inner loop", color: "#f79009" } ] },
};

// innerShown reports whether a point of pts carries the inner loop's
// latency: the inner charts are shown from then on.
function innerShown(pts) { return pts.some((p) => p.inner_latency_ms > 0); }

// Signals (override control): a loop with several signals gets one chart
// per further signal (its setpoint and measurement; the first signal is the
// CPU chart), and every signal's chart shades the ticks where that signal
// limited the rate.
const SIGNAL_COLORS = ["#1570ef", "#c11574", "#0e9384", "#f79009", "#7a5af8", "#12b76a", "#667085"];

// flatten copies each point's signals onto keys the charts read.
function flatten(pts) {
  for (const p of pts) for (const s of (p.signals || [])) {
    p["sig:" + s.name + ":setpoint"] = s.setpoint;
    p["sig:" + s.name + ":measured"] = s.measured;
  }
  return pts;
}

// signalCharts makes sure every further signal of the newest point has its
// chart, and names the first signal's (the CPU chart) for its shading.
function signalCharts() {
  const p = st.points[st.points.length - 1];
  const sigs = (p && p.signals) || [];
  charts.cpu.limitName = sigs.length ? sigs[0].name : null;
  sigs.slice(1).forEach((s, k) => {
    const id = "sig-" + s.name;
    if (charts[id]) return;
    const unit = s.unit ? " (" + s.unit + ")" : "";
    charts[id] = { title: s.name, limitName: s.name, series: [
      { key: "sig:" + s.name + ":setpoint", label: s.name + " setpoint", color: "#d92d20", dash: [6, 4] },
      { key: "sig:" + s.name + ":measured", label: "measured " + s.name, color: SIGNAL_COLORS[(k + 1) % SIGNAL_COLORS.length] } ] };
    const fig = document.createElement("figure");
    fig.className = "chart signal-chart";
    const cap = document.createElement("figcaption");
    cap.textContent = "Signal " + s.name + ": setpoint and measured" + unit + "; shaded while it limits the rate";
    const cv = document.createElement("canvas"); cv.id = "chart-" + id; cv.dataset.points = "0";
    const lg = document.createElement("div"); lg.className = "legend"; lg.id = "legend-" + id;
    fig.append(cap, cv, lg);
    $("signal-charts").append(fig);
    legend(id, charts[id]);
  });
}

function dropSignalCharts() {
  for (const id of Object.keys(charts)) if (id.startsWith("sig-")) delete charts[id];
  $("signal-charts").textContent = "";
  charts.cpu.limitName = null;
}

const st = { cfg: {}, loop: null, points: [], params: null, polling: false, members: {}, memberPts: {} };

// Members (several queues into one database): a destination's page gets two
// charts, its members' allowed and processed rates stacked (each line is the
// sum of the members up to it), from the members' own histories.
async function loadMembers(loops) {
  st.members = {};
  for (const id of loops) {
    const r = await api("/api/loops/" + encodeURIComponent(id) + "/params");
    const d = r.ok && r.body.params && r.body.params.destination;
    if (d) (st.members[d] = st.members[d] || []).push(id);
  }
}

function memberCharts() {
  const ms = st.members[st.loop] || [];
  if (!ms.length || charts["members-rate"]) return;
  for (const [key, what] of [["rate", "allowed"], ["consumed", "processed"]]) {
    const id = "members-" + key;
    charts[id] = { title: id, series: ms.map((m, k) => (
      { key: "mem:" + m + ":" + key, label: m + (k ? " (+ above)" : ""), color: SIGNAL_COLORS[k % SIGNAL_COLORS.length] })) };
    const fig = document.createElement("figure");
    fig.className = "chart member-chart";
    const cap = document.createElement("figcaption");
    cap.textContent = "Members: " + what + " rates, stacked (messages/s)";
    const cv = document.createElement("canvas"); cv.id = "chart-" + id; cv.dataset.points = "0";
    const lg = document.createElement("div"); lg.className = "legend"; lg.id = "legend-" + id;
    fig.append(cap, cv, lg);
    $("member-charts").append(fig);
    legend(id, charts[id]);
  }
}

function dropMemberCharts() {
  for (const id of Object.keys(charts)) if (id.startsWith("members-")) delete charts[id];
  $("member-charts").textContent = "";
  st.memberPts = {};
}

// pollMembers reads the members' new points and stacks them onto the
// destination's points of the same tick.
async function pollMembers(loop) {
  const ms = st.members[loop] || [];
  for (const m of ms) {
    const have = st.memberPts[m] || [];
    const q = have.length ? "?since=" + have[have.length - 1].t + "&limit=" + WINDOW : "?limit=" + WINDOW;
    const r = await api("/api/loops/" + encodeURIComponent(m) + "/history" + q);
    if (!r.ok || loop !== st.loop) return;
    st.memberPts[m] = have.concat(r.body.points).slice(-WINDOW);
  }
  const byT = ms.map((m) => new Map((st.memberPts[m] || []).map((p) => [p.t, p])));
  for (const p of st.points) for (const key of ["rate", "consumed"]) {
    let sum = 0;
    ms.forEach((m, k) => {
      const mp = byT[k].get(p.t);
      sum += mp && mp[key] !== null && mp[key] !== undefined ? mp[key] : 0;
      p["mem:" + m + ":" + key] = mp ? sum : null;
    });
  }
}
const $ = (id) => document.getElementById(id);

async function api(path, opts) {
  const res = await fetch(path, opts);
  let body = null;
  try { body = await res.json(); } catch (e) { body = { error: res.statusText }; }
  return { ok: res.ok, status: res.status, body };
}

function fmt(v, digits) {
  if (v === null || v === undefined) return "–";
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toFixed(2) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
  return v.toFixed(digits === undefined ? (a >= 100 ? 0 : 1) : digits);
}

function hhmm(ms) {
  const d = new Date(ms);
  return String(d.getUTCHours()).padStart(2, "0") + ":" + String(d.getUTCMinutes()).padStart(2, "0");
}

function legend(id, chart) {
  const el = $("legend-" + id);
  el.textContent = "";
  for (const s of chart.series) {
    const span = document.createElement("span");
    const i = document.createElement("i");
    i.style.background = s.color;
    span.append(i, s.label);
    el.append(span);
  }
}

// draw renders one chart: shaded stale and saturated periods, grid, series.
function draw(id, chart, pts) {
  const cv = $("chart-" + id);
  const dpr = window.devicePixelRatio || 1;
  const w = cv.clientWidth, h = cv.clientHeight;
  if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
    cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr);
  }
  const g = cv.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  const L = 48, R = 8, T = 6, B = 20;
  const pw = w - L - R, ph = h - T - B;
  let drawn = 0;
  if (pts.length === 0) {
    g.fillStyle = "#6b7280"; g.font = "13px system-ui";
    g.fillText("no history yet", L + 8, T + 20);
    cv.dataset.points = "0";
    return;
  }
  const t0 = pts[0].t, t1 = Math.max(pts[pts.length - 1].t, t0 + 1);
  let lo = Infinity, hi = -Infinity;
  for (const p of pts) for (const s of chart.series) {
    const v = p[s.key];
    if (v !== null && v !== undefined) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  }
  if (!isFinite(lo)) { lo = 0; hi = 1; }
  if (lo > 0 && lo < (hi - lo)) lo = 0;
  if (hi === lo) { hi += 1; lo -= lo === 0 ? 0 : 1; }
  const pad = (hi - lo) * 0.06; hi += pad; if (lo !== 0) lo -= pad;
  const x = (t) => L + (t - t0) / (t1 - t0) * pw;
  const y = (v) => T + (1 - (v - lo) / (hi - lo)) * ph;
  // shading: a point's flag covers the interval since the previous point
  let limiting = 0, cutting = 0;
  for (let k = 0; k < pts.length; k++) {
    const p = pts[k];
    const lim = chart.limitName && p.limiting === chart.limitName;
    const cut = chart.cutShade && p.withheld > 0;
    if (lim) limiting++;
    if (cut) cutting++;
    if (!p.stale && !p.saturated && !p.limited && !lim && !cut) continue;
    const a = k > 0 ? x(pts[k - 1].t) : x(p.t) - 2, b = x(p.t) + (k === pts.length - 1 ? 2 : 0);
    if (lim) { g.fillStyle = "rgba(21,112,239,.10)"; g.fillRect(a, T, b - a, ph); }
    if (cut) { g.fillStyle = "rgba(247,144,9,.16)"; g.fillRect(a, T, b - a, ph); }
    if (p.saturated) { g.fillStyle = "rgba(245,158,11,.22)"; g.fillRect(a, T, b - a, ph); }
    if (p.stale) { g.fillStyle = "rgba(107,114,128,.25)"; g.fillRect(a, T, b - a, ph); }
    if (p.limited) { g.fillStyle = "rgba(18,183,106,.16)"; g.fillRect(a, T, b - a, ph); }
  }
  // grid and labels
  g.strokeStyle = "#eceae6"; g.fillStyle = "#6b7280"; g.font = "11px system-ui"; g.lineWidth = 1;
  g.textAlign = "right"; g.textBaseline = "middle";
  for (let k = 0; k <= 4; k++) {
    const v = lo + (hi - lo) * k / 4, yy = Math.round(y(v)) + .5;
    g.beginPath(); g.moveTo(L, yy); g.lineTo(L + pw, yy); g.stroke();
    g.fillText(fmt(v, hi - lo < 0.5 ? 3 : hi - lo < 5 ? 2 : undefined), L - 5, yy);
  }
  g.textAlign = "center"; g.textBaseline = "top";
  for (let k = 0; k <= 4; k++) {
    const t = t0 + (t1 - t0) * k / 4;
    g.fillText(hhmm(t), Math.min(Math.max(x(t), L + 14), L + pw - 14), T + ph + 5);
  }
  // series; a null value breaks the line
  for (const s of chart.series) {
    g.strokeStyle = s.color; g.lineWidth = 1.8; g.setLineDash(s.dash || []);
    g.beginPath();
    let pen = false;
    for (const p of pts) {
      const v = p[s.key];
      if (v === null || v === undefined) { pen = false; continue; }
      if (pen) g.lineTo(x(p.t), y(v)); else g.moveTo(x(p.t), y(v));
      pen = true; drawn++;
    }
    g.stroke();
  }
  // a mark where the tick's reason changed (sluice why): a dotted line,
  // and on the first chart the new reason's code
  let marks = 0;
  g.strokeStyle = "#7c3aed"; g.fillStyle = "#7c3aed"; g.setLineDash([2, 3]); g.lineWidth = 1;
  g.font = "10px system-ui"; g.textAlign = "left"; g.textBaseline = "top";
  for (let k = 1; k < pts.length; k++) {
    const p = pts[k];
    if (!p.reason || p.reason === pts[k - 1].reason) continue;
    const xx = Math.round(x(p.t)) + .5;
    g.beginPath(); g.moveTo(xx, T); g.lineTo(xx, T + ph); g.stroke();
    if (id === "cpu") g.fillText(p.reason, xx + 2, T + 2 + 11 * (marks % 3));
    marks++;
  }
  g.setLineDash([]);
  cv.dataset.reasons = String(marks);
  cv.dataset.points = String(drawn);
  cv.dataset.limiting = String(limiting);
  cv.dataset.cutting = String(cutting);
  cv.dataset.last = String(pts[pts.length - 1].t);
}

function drawAll() {
  signalCharts();
  memberCharts();
  const inner = innerShown(st.points);
  $("inner-charts").hidden = !inner;
  for (const [id, c] of Object.entries(charts)) if (!c.inner || inner) draw(id, c, st.points);
  const p = st.points[st.points.length - 1];
  const now = $("now");
  now.textContent = "";
  if (!p) return;
  const item = (label, v) => { const s = document.createElement("span"); s.append(label + " "); const b = document.createElement("b"); b.textContent = v; s.append(b); now.append(s); };
  item("tick", hhmm(p.t) + " UTC");
  item("mode", p.mode || "–");
  item("setpoint", fmt(p.setpoint) + " %");
  // A member of a destination has no signal of its own: its CPU is the
  // destination's. A tick without a datapoint is stale only when it says so.
  const dest = Object.keys(st.members).find((d) => st.members[d].includes(st.loop));
  if (dest) item("CPU", "at " + dest);
  else item("CPU", p.measured !== null ? fmt(p.measured) + " %" : p.stale ? "stale" : "no datapoint yet");
  item("rate", fmt(p.rate) + " msg/s");
  if (p.limiting) item("limited by", p.limiting);
  if (p.inner_latency_ms > 0) {
    item("latency", fmt(p.inner_latency_ms, 2) + " ms" + (p.inner_reference_ms > 0 ? " (reference " + fmt(p.inner_reference_ms, 2) + ")" : " (no reference yet)"));
    if (p.withheld > 0) item("cut", fmt(p.withheld) + " msg/s withheld");
  }
  if (p.reason_text) item("reason", p.reason_text);
  if (p.stale) { const b = document.createElement("span"); b.className = "badge stale"; b.textContent = "stale"; now.append(b); }
  if (p.saturated) { const b = document.createElement("span"); b.className = "badge sat"; b.textContent = "saturated"; now.append(b); }
  if (p.model_drift) {
    const b = document.createElement("span"); b.className = "badge drift"; b.textContent = "model drift";
    b.title = "the plant no longer behaves as the loop's model says: run sluice tune --from-history and update the model";
    now.append(b);
  }
  if (p.limited) { const b = document.createElement("span"); b.className = "badge lim"; b.textContent = "demand-limited"; now.append(b); }
}

async function poll() {
  if (!st.loop || st.polling) return;
  st.polling = true;
  try {
    const loop = st.loop;
    const last = st.points.length ? st.points[st.points.length - 1].t : null;
    const q = last === null ? "?limit=" + WINDOW : "?since=" + last + "&limit=" + WINDOW;
    const r = await api("/api/loops/" + encodeURIComponent(loop) + "/history" + q);
    if (!r.ok || loop !== st.loop) return;
    if (r.body.points.length) {
      st.points = st.points.concat(flatten(r.body.points)).slice(-WINDOW);
      await pollMembers(loop);
      drawAll();
    }
  } finally { st.polling = false; }
}

// form: one row per parameter (the schema's attributes and the item's);
// mode is a select, booleans a select, maps JSON text.
function kindOf(k, v) {
  const f = (st.cfg.fields || []).find((x) => x.name === k);
  if (f) return f.kind;
  if (v !== null && typeof v === "object") return "map";
  if (typeof v === "boolean") return "bool";
  if (typeof v === "number") return "number";
  return "string";
}

// OPERATOR are the fields an operator changes, first after mode; the rest
// are behind "advanced".
const OPERATOR = ["setpoint", MANUAL_RATE, "min_rate", "max_rate"];

// shown is a stored value as the form shows it, rounded to its meaning:
// four significant figures for a number, milliseconds for a duration.
function shown(v, kind) {
  if (typeof v === "number" && kind === "number" && isFinite(v) && !Number.isInteger(v)) return String(Number(v.toPrecision(4)));
  if (typeof v === "string") {
    const m = /^(\d+\.\d{4,})s$/.exec(v);
    if (m) return String(Number(Number(m[1]).toFixed(3))) + "s";
  }
  return v === undefined || v === null ? "" : String(v);
}

function fieldRow(k, v, docs) {
  const kind = kindOf(k, v), doc = docs[k] ? docs[k].doc : "";
  const row = document.createElement("div"); row.className = "row"; row.id = "row-" + k;
  const label = document.createElement("label"); label.htmlFor = "f-" + k;
  label.textContent = k + (docs[k] && docs[k].required ? " *" : "");
  let input;
  if (kind === "map") {
    input = document.createElement("textarea"); input.value = v === undefined ? "" : JSON.stringify(v);
  } else if (kind === "bool") {
    input = document.createElement("select");
    for (const o of ["", "true", "false"]) { const opt = document.createElement("option"); opt.value = opt.textContent = o; input.append(opt); }
    input.value = v === undefined ? "" : String(v);
  } else {
    input = document.createElement("input"); input.type = "text";
    input.value = shown(v, kind);
    // an untouched rounded value is sent back as stored (collect)
    if (v !== undefined && v !== null && input.value !== String(v)) { input.dataset.stored = JSON.stringify(v); input.dataset.shown = input.value; }
    input.placeholder = k === MANUAL_RATE ? "messages/s, for manual mode" : (doc ? "default" : "");
  }
  input.dataset.kind = kind;
  input.id = "f-" + k; input.name = k;
  if (doc) { input.title = doc; label.title = doc; }
  row.append(label, input);
  return row;
}

function buildForm(params) {
  const fields = $("fields");
  fields.textContent = "";
  $("f-mode").value = params.mode === undefined ? "auto" : String(params.mode);
  const docs = {};
  for (const f of (st.cfg.fields || [])) docs[f.name] = f;
  const keys = new Set([...Object.keys(params), ...Object.keys(docs), MANUAL_RATE]);
  keys.delete("mode");
  for (const k of OPERATOR) if (keys.has(k)) fields.append(fieldRow(k, params[k], docs));
  const adv = document.createElement("details"); adv.id = "advanced";
  const rest = [...keys].filter((k) => !OPERATOR.includes(k)).sort();
  const sum = document.createElement("summary"); sum.textContent = "advanced (" + rest.length + " parameters)";
  adv.append(sum);
  for (const k of rest) adv.append(fieldRow(k, params[k], docs));
  fields.append(adv);
  modeChanged();
}

function modeChanged() {
  const row = $("row-" + MANUAL_RATE);
  if (row) row.classList.toggle("dim", $("f-mode").value !== "manual");
}

function showStatus(s) {
  st.params = s.params;
  st.version = s.version || 0;
  showPause();
  const when = s.updated_at ? " · updated " + new Date(s.updated_at).toISOString().replace("T", " ").slice(0, 19) + " UTC" : "";
  const by = s.updated_by ? " by " + s.updated_by : "";
  const what = s.updated_changes ? " (" + s.updated_changes + ")" : "";
  $("params-status").textContent = "PARAMS of loop " + st.loop + when + by + what;
  const ref = $("params-refusal");
  if (s.refusal) { ref.hidden = false; ref.textContent = "Last edit refused: " + s.refusal; } else { ref.hidden = true; ref.textContent = ""; }
}

async function loadParams() {
  const r = await api("/api/loops/" + encodeURIComponent(st.loop) + "/params");
  if (!r.ok) { $("params-status").textContent = "parameters unavailable: " + (r.body.error || r.status); return; }
  showStatus(r.body);
  buildForm(r.body.params);
}

// collect encodes the form: a number where the schema wants one (text that
// is not a number is sent as text, for the validator to refuse with its
// reason), null for an attribute emptied (removed from the item), nothing
// for an optional attribute left empty.
function collect() {
  const out = { mode: $("f-mode").value };
  const had = st.params || {};
  for (const el of $("fields").querySelectorAll("input, select, textarea")) {
    const k = el.name, raw = el.value.trim();
    if (raw === "") { if (k in had) out[k] = null; continue; }
    if (el.dataset.shown !== undefined && raw === el.dataset.shown) { out[k] = JSON.parse(el.dataset.stored); continue; }
    switch (el.dataset.kind) {
      case "map": try { out[k] = JSON.parse(raw); } catch (e) { out[k] = raw; } break;
      case "bool": out[k] = raw === "true"; break;
      case "number": out[k] = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(raw) ? Number(raw) : raw; break;
      default: out[k] = raw;
    }
  }
  return out;
}

async function save(ev) {
  ev.preventDefault();
  const msg = $("params-message");
  msg.className = ""; msg.textContent = "saving…";
  const headers = { "Content-Type": "application/json" };
  const tok = $("f-token").value;
  if (tok) headers["Authorization"] = "Bearer " + tok;
  const r = await api("/api/loops/" + encodeURIComponent(st.loop) + "/params", {
    method: "POST", headers, body: JSON.stringify({ params: collect(), version: st.version }) });
  if (r.ok) {
    msg.className = "ok"; msg.textContent = "Saved: the controller applies it at its next tick.";
    showStatus(r.body); buildForm(r.body.params);
  } else {
    msg.className = "bad";
    if (r.body.conflict) {
      msg.textContent = "Not saved: someone else saved these parameters since this form was loaded. Reload them (select the loop again), then edit.";
      return;
    }
    msg.textContent = (r.body.refused ? "Refused: " : "Not saved (" + r.status + "): ") + (r.body.error || "");
  }
}

// runExperiment writes the loop's experiment attribute (pkg/loop
// experiment.go) from the small form: the controller runs and guards it.
async function runExperiment(ev) {
  ev.preventDefault();
  const msg = $("exp-message");
  const id = "dash-" + new Date().toISOString().replace(/[-:.]/g, "").slice(0, 15);
  let text = "id=" + id + ",step=" + $("x-step").value + ",abort_above=" + $("x-abort").value + ",max_duration=" + $("x-duration").value;
  if (Number($("x-rate").value) > 0) text += ",max_rate_step=" + $("x-rate").value;
  const headers = { "Content-Type": "application/json" };
  const tok = $("f-token").value;
  if (tok) headers["Authorization"] = "Bearer " + tok;
  const r = await api("/api/loops/" + encodeURIComponent(st.loop) + "/params", {
    method: "POST", headers, body: JSON.stringify({ params: { experiment: text }, version: st.version }) });
  msg.className = r.ok ? "ok" : "bad";
  msg.textContent = r.ok ? "Experiment " + id + " written: it starts at the next tick (its status is in STATE)."
    : (r.body.refused ? "Refused: " : "Not written (" + r.status + "): ") + (r.body.error || "");
  if (r.ok) { showStatus(r.body); buildForm(r.body.params); }
}

// togglePause sets the loop's paused attribute (sluice pause) or removes it
// (sluice resume): the controller writes RATE 0 and turns the loop's event
// source mapping off at its next tick, or turns it on and restarts from the
// model's rate.
async function togglePause() {
  const paused = !!(st.params && st.params.paused);
  const headers = { "Content-Type": "application/json" };
  const tok = $("f-token").value;
  if (tok) headers["Authorization"] = "Bearer " + tok;
  const r = await api("/api/loops/" + encodeURIComponent(st.loop) + "/params", {
    method: "POST", headers, body: JSON.stringify({ params: { paused: paused ? null : true }, version: st.version }) });
  const msg = $("pause-message");
  msg.className = r.ok ? "ok small" : "bad small";
  msg.textContent = r.ok ? (paused ? "Resumed at the next tick." : "Paused at the next tick: RATE 0, the mapping off.")
    : (r.body.refused ? "Refused: " : "Not written (" + r.status + "): ") + (r.body.error || "");
  if (r.ok) { showStatus(r.body); buildForm(r.body.params); }
}

function showPause() {
  $("pause").textContent = st.params && st.params.paused ? "Resume" : "Pause";
}

async function selectLoop(id) {
  st.loop = id; st.points = [];
  dropSignalCharts();
  dropMemberCharts();
  if (location.hash !== "#" + id) history.replaceState(null, "", "#" + encodeURIComponent(id));
  $("params-message").textContent = "";
  drawAll();
  await Promise.all([poll(), loadParams()]);
}

async function main() {
  for (const [id, c] of Object.entries(charts)) legend(id, c);
  const cfg = await api("/api/config");
  st.cfg = cfg.body || {};
  $("title").textContent = st.cfg.title || "";
  $("token-row").hidden = !st.cfg.token_required;
  $("save").disabled = !st.cfg.writable;
  const r = await api("/api/loops");
  const loops = (r.ok && r.body.loops) || [];
  const sel = $("loop");
  for (const id of loops) { const o = document.createElement("option"); o.value = o.textContent = id; sel.append(o); }
  await loadMembers(loops);
  sel.addEventListener("change", () => selectLoop(sel.value));
  $("f-mode").addEventListener("change", modeChanged);
  $("params-form").addEventListener("submit", save);
  $("exp-form").addEventListener("submit", runExperiment);
  $("x-run").disabled = !st.cfg.writable;
  $("pause").disabled = !st.cfg.writable;
  $("pause").addEventListener("click", togglePause);
  window.addEventListener("resize", drawAll);
  const want = decodeURIComponent(location.hash.slice(1));
  const first = loops.includes(want) ? want : loops[0];
  if (first) { sel.value = first; await selectLoop(first); }
  setInterval(poll, POLL_MS);
}

main();
