// chime console: a single-page app over chime's HTTP API. The token (admin
// token or namespace key) lives in sessionStorage only, for this tab.

const TOKEN_KEY = "chime.token";
const main = document.getElementById("main");
let session = null; // {token, admin, namespace}
let timers = [];    // polls of the page on screen, stopped on navigation
let gen = 0;        // counts navigations: a render still awaiting when the user moved on starts no polls
let onResize = null; // redraws the page's charts at the window's new width

// ---------- helpers ----------

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// ---------- times ----------
// Times read as the CLI prints them: 24-hour, with the zone
// ("2026-11-23 10:00:00 CET"), in the browser's zone or, with the header's
// UTC switch on, in UTC. The switch is a display preference kept in
// localStorage; nothing else the console knows goes there.

const UTC_KEY = "chime.utc";
let utc = localStorage.getItem(UTC_KEY) === "1";

const pad = (n, w = 2) => String(n).padStart(w, "0");

// fields reads d in the zone on show.
function fields(d) {
  return utc
    ? { y: d.getUTCFullYear(), mo: d.getUTCMonth() + 1, d: d.getUTCDate(), h: d.getUTCHours(), mi: d.getUTCMinutes(), s: d.getUTCSeconds() }
    : { y: d.getFullYear(), mo: d.getMonth() + 1, d: d.getDate(), h: d.getHours(), mi: d.getMinutes(), s: d.getSeconds() };
}

// zoneNames ask for a zone's abbreviation: en-US knows America's (EST),
// en-GB Europe's (CET, BST); neither knows every zone.
const zoneNames = ["en-US", "en-GB"].map((loc) => new Intl.DateTimeFormat(loc, { timeZoneName: "short" }));

// zoneName names the zone on show at d as Go's MST layout does: an
// abbreviation where one is known, else the offset (+03, +0530).
function zoneName(d) {
  if (utc) return "UTC";
  for (const f of zoneNames) {
    const z = f.formatToParts(d).find((p) => p.type === "timeZoneName")?.value;
    if (z && !/^(GMT|UTC)[+\-−]/.test(z)) return z;
  }
  const off = -d.getTimezoneOffset(), a = Math.abs(off);
  return (off < 0 ? "-" : "+") + pad(Math.floor(a / 60)) + (a % 60 ? pad(a % 60) : "");
}

// fmtDate is d as "2006-01-02 15:04:05 MST", in the zone on show.
function fmtDate(d) {
  const f = fields(d);
  return `${f.y}-${pad(f.mo)}-${pad(f.d)} ${pad(f.h)}:${pad(f.mi)}:${pad(f.s)} ${zoneName(d)}`;
}

// fmtTime shows an API time (RFC 3339), escaped for HTML.
function fmtTime(s) {
  if (!s) return "–";
  const d = new Date(s);
  return esc(isNaN(d) ? s : fmtDate(d));
}

function pill(state) {
  return `<span class="state ${esc(state)}">${esc(state || "–")}</span>`;
}

// labelTags shows a job's labels as key:value tags, each clickable in a
// listing to filter by it.
function labelTags(labels) {
  const ls = Object.entries(labels || {}).sort(([a], [b]) => (a < b ? -1 : 1));
  return ls.length ? ls.map(([k, v]) => `<span class="tag label" data-label="${esc(k + ":" + v)}">${esc(k + ":" + v)}</span>`).join(" ") : "–";
}

function toast(msg) {
  const t = document.getElementById("toast");
  t.textContent = msg;
  t.classList.add("show");
  setTimeout(() => t.classList.remove("show"), 3000);
}

class APIError extends Error {
  constructor(status, problem) {
    super(problem?.detail || problem?.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

async function api(method, path, body) {
  const opts = { method, headers: { Authorization: "Bearer " + session.token } };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) throw new APIError(res.status, data);
  return data;
}

function nsPath(ns, rest = "") {
  return "/v1/namespaces/" + encodeURIComponent(ns) + rest;
}

// every polls fn while the page rendered in navigation g is on screen.
function every(g, ms, fn) {
  if (g === gen) timers.push(setInterval(fn, ms));
}

// go shows the page for hash: through the hashchange listener when the hash
// changes, directly when it does not. One render per navigation: rendering
// twice replaced the sign-in form under the user's (and a test's) cursor.
function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

// ---------- sign in ----------

async function signIn(token) {
  session = { token, admin: false, namespace: "" };
  try {
    await api("GET", "/v1/namespaces?limit=1");
    session.admin = true;
  } catch (e) {
    if (e.status !== 403 || !token.startsWith("ck_")) throw e;
    const ns = token.slice(3, token.indexOf("."));
    await api("GET", nsPath(ns));
    session.namespace = ns;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
}

function renderSignIn(error) {
  document.getElementById("who").textContent = "";
  document.getElementById("signout").hidden = true;
  document.getElementById("nav").innerHTML = "";
  main.innerHTML = `
    <form class="card signin" id="signin">
      <h1>Sign in</h1>
      <p class="muted">Paste the admin token (<code>.chime/admin-token</code>) or a namespace key.
      It is kept in this tab's session storage only.</p>
      <input id="token" type="password" autocomplete="off" placeholder="token or ck_… key" required>
      <button class="primary" type="submit">Sign in</button>
      <p class="error" id="signin-error">${esc(error || "")}</p>
    </form>`;
  document.getElementById("signin").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const token = document.getElementById("token").value.trim();
    try {
      await signIn(token);
      go(session.admin ? "#/" : "#/ns/" + encodeURIComponent(session.namespace));
    } catch (e) {
      session = null;
      renderSignIn(e.status === 401 ? "That token is not valid (revoked, mistyped, or never created)." : e.message);
    }
  });
}

// ---------- charts ----------

// The ranges the charts offer, each with a step that gives it 15 to 168
// points (the stats are stored per minute; docs/analytics.md).
const RANGES = [
  { key: "15m", label: "15 min", span: 15 * 60e3, step: 60e3, tick: 2 * 60e3, per: "minute" },
  { key: "1h", label: "1 h", span: 3600e3, step: 60e3, tick: 10 * 60e3, per: "minute" },
  { key: "24h", label: "24 h", span: 86400e3, step: 15 * 60e3, tick: 3 * 3600e3, per: "15 minutes" },
  { key: "7d", label: "7 d", span: 7 * 86400e3, step: 3600e3, tick: 86400e3, per: "hour" },
];
const RANGE_KEY = "chime.range";

// COLORS: failures and breaker trips apart (red and violet), held-back
// callbacks in orange.
const COLORS = { requests: "#3056d3", failures: "#c23b3b", deferred: "#d97706", trip: "#7c3aed", p50: "#1a7f4b", p99: "#0e7490" };

// chartWindow is the range r up to now, in whole steps: the last step is
// the current one, still filling (partial).
function chartWindow(r, now = Date.now()) {
  const end = Math.floor(now / r.step) * r.step + r.step;
  return { ...r, start: end - r.span, end, now, n: Math.round(r.span / r.step) };
}

// niceScale rounds max up to a scale of at most 5 round ticks.
function niceScale(max, integer) {
  if (!(max > 0)) return { max: 4, step: 1 };
  const raw = max / 4, e = Math.pow(10, Math.floor(Math.log10(raw)));
  let step = (integer && e <= 1 ? [1, 2, 5, 10] : [1, 2, 2.5, 5, 10]).map((m) => m * e).find((v) => v >= raw);
  if (integer) step = Math.max(1, step);
  return { max: Math.ceil(max / step - 1e-9) * step, step };
}

function fmtNum(v) {
  if (v >= 1e6) return Math.round(v / 1e5) / 10 + "M";
  if (v >= 1e4) return Math.round(v / 1e2) / 10 + "k";
  return String(v >= 10 ? Math.round(v * 10) / 10 : Math.round(v * 100) / 100);
}

// tickLabel is a time axis label: the day (MM-DD) at midnight in a range
// of a day or more, else the time of day.
function tickLabel(t, win) {
  const f = fields(new Date(t));
  if (win.span >= 86400e3 && f.h === 0 && f.mi === 0) return `${pad(f.mo)}-${pad(f.d)}`;
  return `${pad(f.h)}:${pad(f.mi)}`;
}

// labelWidth estimates a label's width at the charts' 11 px font.
const labelWidth = (text) => text.length * 6.6;

// drawChart draws series (one value per step of win, null for none) into
// el at its width: each value at its step's middle, the breaker's open
// periods shaded, its trips marked, and the last, current step hatched
// and reached by a dashed line (it is still filling: not a drop to zero).
function drawChart(el, { series, win, trips, spans, integer, title }) {
  const W = Math.max(300, Math.floor(el.clientWidth || 600)), H = 230, L = 44, R = 12, T = 22, B = 24;
  const pw = W - L - R, ph = H - T - B;
  const x = (t) => L + ((t - win.start) / (win.end - win.start)) * pw;
  const scale = niceScale(Math.max(0, ...series.flatMap((s) => s.values.filter((v) => v != null))), integer);
  const y = (v) => T + (1 - v / scale.max) * ph;
  const mid = (i) => win.start + (i + 0.5) * win.step;
  const f = (v) => v.toFixed(1);
  const hatch = el.id + "-hatch";
  let svg = `<svg class="chart" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(title)}"
    data-range="${esc(win.key)}" data-steps="${win.n}" data-step-ms="${win.step}">
    <defs><pattern id="${esc(hatch)}" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
      <line x1="0" y1="0" x2="0" y2="6" stroke="#b9c0d4" stroke-width="2"/></pattern></defs>`;
  for (const sp of spans) {
    const a = Math.max(sp.from, win.start), b = Math.min(sp.to, win.end);
    if (b <= a) continue;
    svg += `<rect class="open-span" x="${f(x(a))}" y="${T}" width="${f(Math.max(1, x(b) - x(a)))}" height="${ph}" fill="${COLORS.trip}" fill-opacity="0.09">
      <title>${esc(`breaker ${sp.state} from ${fmtDate(new Date(sp.from))}`)}</title></rect>`;
  }
  for (let v = 0; v <= scale.max + 1e-9; v += scale.step) {
    svg += `<line x1="${L}" x2="${W - R}" y1="${f(y(v))}" y2="${f(y(v))}" stroke="#eceef3"/>`;
    svg += `<text x="${L - 6}" y="${f(y(v) + 4)}" text-anchor="end">${esc(fmtNum(v))}</text>`;
  }
  // The current step: hatched, labelled, its value dashed.
  const cur = win.start + (win.n - 1) * win.step;
  svg += `<rect class="partial-bucket" x="${f(x(cur))}" y="${T}" width="${f(x(win.end) - x(cur))}" height="${ph}" fill="url(#${esc(hatch)})" fill-opacity="0.7">
    <title>${esc(`the current ${win.per} (from ${fmtDate(new Date(cur))}) is still filling`)}</title></rect>`;
  svg += `<text class="partial-label" x="${f(x(win.end))}" y="${T - 8}" text-anchor="end">now (partial)</text>`;
  // Time axis: round times in the zone on show, labels kept inside the
  // chart and apart from each other.
  const off = utc ? 0 : -new Date(win.start).getTimezoneOffset() * 60e3;
  let right = -Infinity;
  for (let t = Math.ceil((win.start + off) / win.tick) * win.tick - off; t <= win.end; t += win.tick) {
    const label = tickLabel(t, win), w = labelWidth(label), xx = x(t);
    let lx = Math.min(Math.max(xx, L + w / 2), W - 2 - w / 2);
    if (lx - w / 2 < right + 8) continue;
    right = lx + w / 2;
    svg += `<line x1="${f(xx)}" x2="${f(xx)}" y1="${T + ph}" y2="${T + ph + 4}" stroke="#c5cbe0"/>`;
    svg += `<text class="tick" x="${f(lx)}" y="${H - 6}" text-anchor="middle">${esc(label)}</text>`;
  }
  for (const m of trips) {
    if (m.t < win.start || m.t > win.end) continue;
    svg += `<line class="trip" x1="${f(x(m.t))}" x2="${f(x(m.t))}" y1="${T}" y2="${T + ph}" stroke="${COLORS.trip}" stroke-width="1.5" stroke-dasharray="4 3"><title>${esc(m.label)}</title></line>`;
  }
  // The first series (the main one) last, on top of the others.
  for (const s of series.slice().reverse()) {
    // Runs of values (null breaks a line), the current step apart.
    const full = s.values.slice(0, win.n - 1);
    let run = [];
    const flush = () => {
      if (run.length === 1) svg += `<circle class="series" data-name="${esc(s.name)}" cx="${f(x(mid(run[0])))}" cy="${f(y(full[run[0]]))}" r="2.2" fill="${s.color}"/>`;
      else if (run.length > 1) svg += `<polyline class="series" data-name="${esc(s.name)}" fill="none" stroke="${s.color}" stroke-width="1.8" points="${run.map((i) => `${f(x(mid(i)))},${f(y(full[i]))}`).join(" ")}"/>`;
      run = [];
    };
    full.forEach((v, i) => { if (v == null) flush(); else run.push(i); });
    flush();
    const last = s.values[win.n - 1], prev = s.values[win.n - 2];
    if (last != null) {
      const lx = x(mid(win.n - 1)), ly = y(last);
      if (prev != null) svg += `<polyline class="series partial" data-name="${esc(s.name)}" fill="none" stroke="${s.color}" stroke-width="1.8" stroke-dasharray="3 3" points="${f(x(mid(win.n - 2)))},${f(y(prev))} ${f(lx)},${f(ly)}"/>`;
      svg += `<circle class="partial-point" data-name="${esc(s.name)}" cx="${f(lx)}" cy="${f(ly)}" r="3" fill="#fff" stroke="${s.color}" stroke-width="1.5"><title>${esc(`${s.name}: ${fmtNum(last)} so far`)}</title></circle>`;
    }
  }
  svg += `</svg><div class="legend">` +
    series.map((s) => `<span><i class="swatch" style="background:${s.color}"></i>${esc(s.name)}</span>`).join("") +
    `<span><i class="swatch trip"></i>breaker trip</span><span><i class="swatch open"></i>breaker open</span>` +
    `<span><i class="swatch partial"></i>current ${esc(win.per)}, partial</span>` +
    `<span class="zone">times in ${esc(zoneName(new Date(win.now)))}</span></div>`;
  el.innerHTML = svg;
}

// breakerSpans are the periods in [from, to) when the breaker held
// callbacks back (open, forced open, disabled, half-open), from its
// transitions (oldest first) and its state now ({state, since}), which
// may be newer than the stored history.
function breakerSpans(transitions, now, from, to) {
  const holds = (st) => ["open", "forced_open", "disabled", "half_open"].includes(st);
  const spans = [];
  const all = transitions.slice();
  const lastAt = all.length ? new Date(all[all.length - 1].at).getTime() : -Infinity;
  const nowSince = new Date(now.since || 0).getTime();
  if (all.length && now.state !== all[all.length - 1].to && nowSince > lastAt) all.push({ at: now.since, to: now.state });
  let st = all.length ? all[0].from : now.state, since = from;
  for (const tr of all) {
    const at = new Date(tr.at).getTime();
    if (holds(st) && at > since) spans.push({ from: since, to: at, state: st });
    st = tr.to;
    since = at;
  }
  if (holds(st) && to > since) spans.push({ from: since, to, state: st });
  return spans;
}

// ---------- pages ----------

async function renderNamespaces() {
  const g = gen;
  main.innerHTML = `<h1>Namespaces</h1><div id="ns-list" class="muted">Loading…</div>`;
  const load = async () => {
    const data = await api("GET", "/v1/namespaces?limit=500");
    const rows = data.namespaces.map((n) => `
      <tr class="click" data-ns="${esc(n.namespace)}">
        <td><a href="#/ns/${encodeURIComponent(n.namespace)}">${esc(n.namespace)}</a></td>
        <td>${pill(n.breaker_state)}</td>
        <td class="num">${esc(n.keys)}</td>
        <td class="num">${esc(n.max_concurrency ?? "–")}</td>
        <td>${fmtTime(n.updated_at)}</td>
      </tr>`).join("");
    document.getElementById("ns-list").innerHTML = data.namespaces.length === 0
      ? `<p class="muted">No namespaces yet. Create one with <code>PUT /v1/namespaces/{ns}</code>.</p>`
      : `<table id="namespaces"><thead><tr><th>Namespace</th><th>Breaker</th><th>Keys</th><th>Max concurrency</th><th>Updated</th></tr></thead><tbody>${rows}</tbody></table>
         ${data.next_cursor ? `<p class="muted">More namespaces than shown; use the API to page.</p>` : ""}`;
    for (const tr of document.querySelectorAll("#namespaces tr.click")) {
      tr.addEventListener("click", () => { location.hash = "#/ns/" + encodeURIComponent(tr.dataset.ns); });
    }
  };
  await load();
  every(g, 5000, () => load().catch(() => {}));
}

async function renderNamespace(ns, tab) {
  const g = gen;
  main.innerHTML = `
    <h1>${esc(ns)} <span id="breaker-pill"></span></h1>
    <div class="grid">
      <div class="card" id="breaker-card"><p class="muted">Loading the breaker…</p></div>
      <div class="card" id="breaker-controls"></div>
    </div>
    <div class="row range-row">
      <h2>Activity</h2>
      <div class="range" id="range" role="group" aria-label="Time range of the charts">${RANGES.map((r) =>
        `<button data-range="${esc(r.key)}">${esc(r.label)}</button>`).join("")}</div>
    </div>
    <div class="grid">
      <div class="card"><h2 id="chart-requests-title">Callbacks</h2><div id="chart-requests" class="chart-box muted">Loading…</div></div>
      <div class="card"><h2 id="chart-latency-title">Latency</h2><div id="chart-latency" class="chart-box muted">Loading…</div></div>
    </div>
    <div class="card"><h2 id="history-title">Breaker history</h2><div id="history" class="muted">Loading…</div></div>
    <div class="tabs">
      <a href="#/ns/${encodeURIComponent(ns)}/jobs" class="${tab === "jobs" ? "on" : ""}" id="tab-jobs">Jobs</a>
      <a href="#/ns/${encodeURIComponent(ns)}/dead-letters" class="${tab === "dead-letters" ? "on" : ""}" id="tab-dead">Dead letters</a>
    </div>
    <div id="tab"></div>`;
  let breakerNow = { state: "closed" }; // the breaker at the last poll, for the charts' shading
  // The charts show the range picked (remembered in localStorage), up to
  // now, moving: every poll asks for the range up to the end of the
  // current step (and history a minute ahead, so a transition stamped by a
  // clock slightly ahead shows).
  let range = RANGES.find((r) => r.key === localStorage.getItem(RANGE_KEY)) || RANGES[1];
  let shown = null; // what the charts last drew, redrawn on resize
  let seq = 0;      // a load overtaken by a newer one (another range) draws nothing
  const rangeButtons = () => {
    for (const b of document.querySelectorAll("#range button")) b.setAttribute("aria-pressed", String(b.dataset.range === range.key));
  };
  const draw = () => {
    if (!shown) return;
    const { win, pts, trs } = shown;
    const trips = trs.filter((t) => t.to === "open" || t.to === "forced_open")
      .map((t) => ({ t: new Date(t.at).getTime(), label: `${t.from} → ${t.to} at ${fmtDate(new Date(t.at))}: ${t.reason}` }));
    const spans = breakerSpans(trs, breakerNow, win.start, win.now);
    document.getElementById("chart-requests-title").textContent = `Callbacks per ${win.per}, last ${win.label}`;
    document.getElementById("chart-latency-title").textContent = `Latency per ${win.per} (ms), last ${win.label}`;
    drawChart(document.getElementById("chart-requests"), {
      title: "callbacks sent, failed and held back", win, trips, spans, integer: true, series: [
        { name: "requests", color: COLORS.requests, values: pts.map((p) => p && p.requests) },
        { name: "failures", color: COLORS.failures, values: pts.map((p) => p && p.failures) },
        { name: "held back (deferred)", color: COLORS.deferred, values: pts.map((p) => p && p.deferred) },
      ],
    });
    // Latency is over the calls made: a step without any has none (a gap).
    drawChart(document.getElementById("chart-latency"), {
      title: "latency p50 and p99", win, trips, spans, integer: false, series: [
        { name: "p50", color: COLORS.p50, values: pts.map((p) => (p && p.requests ? p.p50_ms : null)) },
        { name: "p99", color: COLORS.p99, values: pts.map((p) => (p && p.requests ? p.p99_ms : null)) },
      ],
    });
  };
  const HISTORY_ROWS = 20;
  const loadAnalytics = async () => {
    const my = ++seq, win = chartWindow(range);
    const iso = (t) => encodeURIComponent(new Date(t).toISOString());
    try {
      const [h, stats] = await Promise.all([
        api("GET", nsPath(ns, `/breaker/history?from=${iso(win.start)}&to=${iso(win.end + 60e3)}`)),
        api("GET", nsPath(ns, `/stats?step=${win.step / 60e3}m&from=${iso(win.start)}&to=${iso(win.end)}`)),
      ]);
      if (my !== seq || g !== gen) return;
      // One slot per step, by time: a point the API left out draws as none.
      const pts = new Array(win.n).fill(null);
      for (const p of stats.points) {
        const i = Math.round((new Date(p.t).getTime() - win.start) / win.step);
        if (i >= 0 && i < win.n) pts[i] = p;
      }
      shown = { win, pts, trs: h.transitions };
      draw();
      const trs = h.transitions.slice().reverse();
      document.getElementById("history-title").textContent = `Breaker history, last ${win.label}`;
      document.getElementById("history").innerHTML = trs.length === 0
        ? `<p class="muted">No transitions in the last ${esc(win.label)}.</p>`
        : `<table id="history-table"><thead><tr><th>At</th><th>From</th><th>To</th><th>Trips</th><th>Reason</th></tr></thead><tbody>` +
          trs.slice(0, HISTORY_ROWS).map((t) => `<tr><td class="time">${fmtTime(t.at)}</td><td>${pill(t.from)}</td><td>${pill(t.to)}</td><td class="num">${esc(t.consecutive_trips)}</td><td>${esc(t.reason)}</td></tr>`).join("") +
          `</tbody></table>` +
          (trs.length > HISTORY_ROWS ? `<p class="muted">The newest ${HISTORY_ROWS} of ${esc(trs.length)} in this range; pick a shorter range to see the others.</p>` : "");
    } catch (e) {
      // Analytics may be starting or away: say so where the charts go, and
      // keep trying, so the page fills in once ClickHouse answers.
      if (my !== seq || g !== gen) return;
      shown = null;
      const msg = e.status === 503 ? "Analytics unavailable: " + e.message : e.message;
      for (const id of ["chart-requests", "chart-latency", "history"]) document.getElementById(id).textContent = msg;
    }
  };
  // Working as soon as they show, before the first load is done.
  rangeButtons();
  for (const b of document.querySelectorAll("#range button")) {
    b.addEventListener("click", () => {
      range = RANGES.find((r) => r.key === b.dataset.range);
      localStorage.setItem(RANGE_KEY, range.key);
      rangeButtons();
      loadAnalytics();
    });
  }
  onResize = draw;

  const loadBreaker = async () => {
    const b = await api("GET", nsPath(ns, "/breaker"));
    breakerNow = { state: b.state, since: b.since };
    document.getElementById("breaker-pill").innerHTML = pill(b.state);
    const w = b.window || {};
    document.getElementById("breaker-card").innerHTML = `
      <h2>Breaker</h2>
      <dl>
        <dt>State</dt><dd id="breaker-state">${pill(b.state)}</dd>
        <dt>Since</dt><dd>${fmtTime(b.since)}</dd>
        <dt>Reason</dt><dd>${esc(b.reason || "–")}</dd>
        <dt>Next check</dt><dd>${fmtTime(b.next_check_at)}</dd>
        <dt>Consecutive trips</dt><dd>${esc(b.consecutive_trips ?? 0)}</dd>
        <dt>Window</dt><dd>${esc(w.requests ?? 0)} requests, ${esc(w.failures ?? 0)} failures</dd>
      </dl>`;
  };
  await loadBreaker().catch((e) => { document.getElementById("breaker-card").textContent = e.message; });
  // The breaker live; its history and charts, as the sink stores them, below.
  every(g, 5000, () => loadBreaker().catch(() => {}));

  const controls = document.getElementById("breaker-controls");
  if (session.admin) {
    controls.innerHTML = `<h2>Breaker controls</h2>
      <div class="row">
        <button data-mode="force_open" class="danger">Force open</button>
        <button data-mode="force_closed">Force closed</button>
        <button data-mode="auto">Automatic</button>
        <button data-reset="1">Reset</button>
      </div>
      <p class="muted">Force open defers every callback of the namespace; automatic hands the breaker back to the failure rate.</p>`;
    for (const btn of controls.querySelectorAll("button")) {
      btn.addEventListener("click", async () => {
        btn.disabled = true;
        try {
          const res = btn.dataset.reset
            ? await api("POST", nsPath(ns, "/breaker/reset"), {})
            : await api("PUT", nsPath(ns, "/breaker"), { mode: btn.dataset.mode });
          toast(res.applied ? `Breaker is now ${res.breaker.state}` : "Command published; the breaker applies it shortly");
          await loadBreaker();
          await loadAnalytics();
        } catch (e) { toast(e.message); } finally { btn.disabled = false; }
      });
    }
  } else {
    controls.innerHTML = `<h2>Breaker controls</h2><p class="muted">Only the admin token may force or reset the breaker.</p>`;
  }

  await loadAnalytics();
  every(g, 10000, () => loadAnalytics());

  if (tab === "dead-letters") await renderDeadLetters(ns);
  else await renderJobs(ns);
}

async function renderJobs(ns) {
  const el = document.getElementById("tab");
  el.innerHTML = `
    <div class="row">
      <label>State <select id="job-state">
        <option value="">all</option><option>scheduled</option><option>paused</option>
        <option>completed</option><option>cancelled</option><option>dead</option>
      </select></label>
      <label>Labels <input id="job-labels" size="32" placeholder="team:billing tier:gold"
        title="key:value, several separated by spaces: a job must have every one. Click a job's label to add it."></label>
    </div>
    <table id="jobs"><thead><tr><th>Job</th><th>State</th><th>Next fire</th><th>Fires</th><th>Last outcome</th><th>Labels</th><th>Created</th></tr></thead><tbody></tbody></table>
    <p><button id="jobs-more" hidden>More</button></p>`;
  let cursor = "", seq = 0;
  const body = el.querySelector("tbody");
  // A reset (a filter changed) makes the pages read before it stale: a
  // later answer to an earlier filter must not land in the list.
  const load = async (reset) => {
    const mine = reset ? ++seq : seq;
    const state = document.getElementById("job-state").value;
    const q = new URLSearchParams({ limit: "50" });
    if (state) q.set("state", state);
    for (const l of labelFilter.value.split(/\s+/).filter(Boolean)) q.append("label", l);
    if (!reset && cursor) q.set("cursor", cursor);
    const data = await api("GET", nsPath(ns, "/jobs?" + q));
    if (mine !== seq) return;
    if (reset) body.innerHTML = "";
    body.insertAdjacentHTML("beforeend", data.jobs.map((j) => `
      <tr class="click" data-id="${esc(j.id)}">
        <td><a href="#/ns/${encodeURIComponent(ns)}/job/${encodeURIComponent(j.id)}">${esc(j.id)}</a></td>
        <td>${pill(j.state)}</td><td>${fmtTime(j.next_fire_at)}</td><td class="num">${esc(j.fires)}</td>
        <td>${j.last_outcome ? pill(j.last_outcome.result) : "–"}</td><td class="labels">${labelTags(j.labels)}</td><td>${fmtTime(j.created_at)}</td>
      </tr>`).join(""));
    if (!body.children.length) body.innerHTML = `<tr><td colspan="7" class="muted">No jobs${labelFilter.value.trim() ? " with these labels" : ""}.</td></tr>`;
    cursor = data.next_cursor;
    document.getElementById("jobs-more").hidden = !cursor;
    for (const tr of body.querySelectorAll("tr.click")) {
      tr.onclick = (ev) => {
        const tag = ev.target.closest("[data-label]");
        if (tag) { // filter by it, beside the labels already asked for
          const have = labelFilter.value.split(/\s+/).filter(Boolean);
          if (!have.includes(tag.dataset.label)) labelFilter.value = [...have, tag.dataset.label].join(" ");
          load(true).catch((e) => toast(e.message));
          return;
        }
        location.hash = "#/ns/" + encodeURIComponent(ns) + "/job/" + encodeURIComponent(tr.dataset.id);
      };
    }
  };
  const labelFilter = document.getElementById("job-labels");
  labelFilter.addEventListener("change", () => load(true).catch((e) => toast(e.message)));
  document.getElementById("job-state").addEventListener("change", () => load(true).catch((e) => toast(e.message)));
  document.getElementById("jobs-more").addEventListener("click", () => load(false).catch((e) => toast(e.message)));
  await load(true).catch((e) => { el.textContent = e.message; });
}

// renderDeadLetters lists the newest dead letters with their replay: when
// and as which job, or a button to replay one. "Replay these N" counts and
// replays only those listed that were not replayed yet (the bulk route
// skips the others); the list is read again after every replay.
async function renderDeadLetters(ns) {
  const el = document.getElementById("tab");
  el.innerHTML = `
    <div class="row">
      <label>Show <select id="dl-replayed">
        <option value="">all</option><option value="false">not replayed</option><option value="true">replayed</option>
      </select></label>
    </div>
    <div id="dl" class="muted">Loading…</div>`;
  const box = document.getElementById("dl");
  const load = async () => {
    const q = new URLSearchParams({ limit: "100" });
    const filter = document.getElementById("dl-replayed").value;
    if (filter) q.set("replayed", filter);
    const letters = (await api("GET", nsPath(ns, "/dead-letters?" + q))).dead_letters;
    box.className = "";
    if (letters.length === 0) {
      box.innerHTML = `<p class="muted" id="dl-empty">No dead letters${filter === "false" ? " left to replay" : filter === "true" ? " replayed" : ""}.</p>`;
      return;
    }
    const todo = letters.filter((d) => !d.replayed);
    box.innerHTML = `
      <div class="row">${todo.length > 0
        ? `<button id="replay-all" class="primary">Replay these ${todo.length}</button>
           <span class="muted">${todo.length} of the ${letters.length} listed not replayed yet; each dead letter is replayed once</span>`
        : `<span class="muted" id="dl-all-replayed">Every dead letter listed is replayed.</span>`}</div>
      <table id="dead-letters"><thead><tr><th>Job</th><th>Fire</th><th>Attempts</th><th>At</th><th>Reason</th><th>Replay</th></tr></thead><tbody>` +
      letters.map((d) => `<tr class="${d.replayed ? "replayed" : ""}">
        <td><a href="#/ns/${encodeURIComponent(ns)}/job/${encodeURIComponent(d.job_id)}">${esc(d.job_id)}</a></td>
        <td class="num">${esc(d.fire_seq)}</td><td class="num">${esc(d.attempts)}</td><td>${fmtTime(d.at)}</td>
        <td>${esc(d.reason)}</td>
        <td>${d.replayed
          ? `<span class="state replayed">replayed</span> <span class="replay-when">${fmtTime(d.replayed_at)}</span>
             as <a class="replay-job" href="#/ns/${encodeURIComponent(ns)}/job/${encodeURIComponent(d.replay_job_id)}">${esc(d.replay_job_id)}</a>`
          : `<button class="replay" data-path="${esc(d.replay_path)}">Replay</button>`}</td></tr>`).join("") +
      `</tbody></table>`;
    for (const b of box.querySelectorAll("button.replay")) {
      b.addEventListener("click", async () => {
        b.disabled = true;
        try {
          const r = await api("POST", b.dataset.path);
          toast(r.already_replayed ? `Already replayed ${fmtTime(r.replayed_at)} as job ${r.id}` : "Replayed as job " + r.id);
          await load();
        } catch (e) { toast(e.message); b.disabled = false; }
      });
    }
    const all = document.getElementById("replay-all");
    if (!all) return;
    all.addEventListener("click", async () => {
      all.disabled = true;
      try {
        // The listed window, newest first (to: just past the newest), so a
        // dead letter that arrived since is not replayed in one's place.
        const to = new Date(Date.parse(letters[0].at) + 1).toISOString();
        const r = await api("POST", nsPath(ns, "/dead-letters:replay"), { from: letters[letters.length - 1].at, to, limit: todo.length });
        let msg = `Replayed ${r.replayed}, already replayed ${r.already_replayed}, failed ${r.failed.length}`;
        if (r.quota_refused > 0) msg += `, over the job quotas ${r.quota_refused}: ${r.quota_reason}`;
        toast(msg);
        await load();
      } catch (e) { toast(e.message); all.disabled = false; }
    });
  };
  const show = () => load().catch((e) => { box.textContent = e.status === 503 ? "Analytics unavailable: " + e.message : e.message; });
  document.getElementById("dl-replayed").addEventListener("change", show);
  await show();
}

// JOB_ACTIONS are the controls each job state takes: what the API would
// answer 409 to (an ended job: completed, cancelled, dead), or would do
// nothing for (pausing a paused job), is not offered.
const JOB_ACTIONS = {
  scheduled: ["trigger", "pause", "cancel"],
  paused: ["trigger", "resume", "cancel"],
};
const ACTION_BUTTONS = {
  trigger: `<button data-act="trigger" class="primary">Run now</button>`,
  pause: `<button data-act="pause">Pause</button>`,
  resume: `<button data-act="resume">Resume</button>`,
  cancel: `<button data-act="cancel" class="danger">Cancel</button>`,
};
const ENDED = {
  completed: "This job has completed: it fires no more.",
  cancelled: "This job was cancelled: it fires no more.",
  dead: "This job is dead: its retries ran out or its callback was refused, and it fires no more. Its failed fire is in the dead letters, where it can be replayed.",
};

// DEFER_KINDS name why a callback was held back (its error_kind).
const DEFER_KINDS = { breaker_open: "breaker", rate_limit: "rate limit", concurrency: "concurrency cap" };

// pagedOutcomes lists a job's outcomes of some classes in el, size a
// page, newest first: Older and Newer walk the API's cursors. Polling
// reloads the page on show; only the first page gains new rows.
function pagedOutcomes(el, base, { id, classes, size, head, row, empty }) {
  const cursors = [""]; // cursors[i] reads page i; the next one is known once read
  let page = 0, next = "";
  el.innerHTML = `<div id="${id}-body" class="muted">Loading…</div>
    <div class="row pager" id="${id}-pager" hidden>
      <button id="${id}-newer">← Newer</button><span class="muted" id="${id}-page"></span><button id="${id}-older">Older →</button>
    </div>`;
  const body = document.getElementById(id + "-body");
  const load = async () => {
    const at = page;
    const q = new URLSearchParams({ limit: String(size), class: classes.join(",") });
    if (cursors[at]) q.set("cursor", cursors[at]);
    const data = await api("GET", base + "/attempts?" + q);
    if (at !== page) return; // the user paged on meanwhile
    next = data.next_cursor || "";
    cursors.length = at + 1;
    if (next) cursors.push(next);
    body.classList.toggle("muted", data.attempts.length === 0);
    body.innerHTML = data.attempts.length === 0
      ? `<p class="muted">${esc(at === 0 ? empty : "No older ones.")}</p>`
      : `<table id="${id}-table"><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join("")}</tr></thead><tbody>` +
        data.attempts.map(row).join("") + `</tbody></table>`;
    document.getElementById(id + "-pager").hidden = at === 0 && !next;
    document.getElementById(id + "-newer").disabled = at === 0;
    document.getElementById(id + "-older").disabled = !next;
    document.getElementById(id + "-page").textContent = at === 0 ? `newest ${size}` : `page ${at + 1}`;
  };
  const show = (to) => {
    page = to;
    load().catch((e) => toast(e.message));
  };
  document.getElementById(id + "-newer").addEventListener("click", () => { if (page > 0) show(page - 1); });
  document.getElementById(id + "-older").addEventListener("click", () => { if (next) show(page + 1); });
  return load;
}

// OVERLAP and CATCHUP say what each policy does, as docs/guarantees.md
// does; a job that names none has the first.
const OVERLAP = {
  allow_all: "every occurrence fires, whatever earlier fires are doing",
  skip: "an occurrence due while a fire is open is skipped",
  buffer_one: "one occurrence due while a fire is open waits, and fires when it settles",
  cancel_other: "an occurrence due while a fire is open fires, and the open one's retries are dropped",
};
const CATCHUP = {
  latest: "after downtime or a pause, only the latest missed occurrence fires",
  none: "missed occurrences are skipped",
  all: "every missed occurrence within the window fires, in order",
};

// policies lists a job's schedule policies: overlap, catch-up, end
// conditions, pause on failure and exclusions.
function policies(j) {
  const s = j.schedule || {};
  const overlap = j.overlap || "allow_all", catchup = j.catchup || "latest";
  const excl = (s.exclude || []).map((x) => x.date ? `${esc(x.date)}` : `cron ${esc(x.cron)} for ${esc(x.duration || "")}`)
    .map((t, i) => `<li>${t}${(s.exclude[i].timezone) ? " (" + esc(s.exclude[i].timezone) + ")" : ""}</li>`);
  return `<dl>
    <dt>Overlap</dt><dd id="policy-overlap"><code>${esc(overlap)}</code>${j.overlap ? "" : " (default)"}: ${esc(OVERLAP[overlap] || "")}</dd>
    <dt>Catch-up</dt><dd id="policy-catchup"><code>${esc(catchup)}</code>${j.catchup ? "" : " (default)"}${j.catchup_window ? ", window " + esc(j.catchup_window) : ""}: ${esc(CATCHUP[catchup] || "")}</dd>
    <dt>Ends</dt><dd id="policy-ends">${[j.max_fires ? `after ${esc(j.max_fires)} fires` : "", s.end_at ? "at " + fmtTime(s.end_at) : ""].filter(Boolean).join(", or ") || "never"}</dd>
    <dt>On failure</dt><dd id="policy-failure">${j.pause_on_failure ? "pauses itself when a fire fails or is dead-lettered" : "goes on firing"}</dd>
    <dt>Excluded</dt><dd id="policy-exclude">${excl.length ? `<ul>${excl.join("")}</ul>` : "nothing"}</dd>
  </dl>`;
}

async function renderJob(ns, id) {
  const g = gen;
  main.innerHTML = `<p><a href="#/ns/${encodeURIComponent(ns)}">← ${esc(ns)}</a></p>
    <h1>Job ${esc(id)} <span id="job-pill"></span></h1>
    <div class="row" id="job-actions"></div>
    <div class="grid" style="margin-top:1rem">
      <div class="card"><h2>Job</h2><div id="job-fields" class="muted">Loading…</div></div>
      <div class="card"><h2>Fires in progress</h2><div id="job-fires"></div>
        <h2>Next fires</h2><div id="next-fires"></div></div>
    </div>
    <div class="card"><h2>Policies</h2><div id="job-policies"></div></div>
    <div class="card"><h2>Attempts</h2><p class="muted hint">Calls made to the callback, newest first.</p><div id="attempts"></div></div>
    <div class="card"><h2>Held back</h2><p class="muted hint">Callbacks the breaker or the namespace's limits deferred before calling: no attempt was charged, the call followed later.</p><div id="deferrals"></div></div>`;
  const base = nsPath(ns, "/jobs/" + encodeURIComponent(id));
  const actions = document.getElementById("job-actions");
  let shownState = null;
  const showActions = (state) => {
    if (state === shownState) return; // keep the buttons under the user's cursor
    shownState = state;
    const acts = JOB_ACTIONS[state];
    actions.innerHTML = acts ? acts.map((a) => ACTION_BUTTONS[a]).join("")
      : `<p class="muted" id="job-ended">${esc(ENDED[state] || `This job is ${state}: it takes no controls.`)}` +
        (state === "dead" ? ` <a href="#/ns/${encodeURIComponent(ns)}/dead-letters">Dead letters</a>` : "") + `</p>`;
  };
  const load = async () => {
    const j = await api("GET", base);
    document.getElementById("job-pill").innerHTML = pill(j.state);
    showActions(j.state);
    const s = j.schedule || {}, cb = j.callback || {};
    const schedule = s.cron ? esc(`cron ${s.cron}${s.timezone ? " (" + s.timezone + ")" : ""}`) : s.every ? esc(`every ${s.every}`) : s.at ? "at " + fmtTime(s.at) : "–";
    document.getElementById("job-fields").innerHTML = `<dl>
      <dt>State</dt><dd>${pill(j.state)}</dd>
      <dt>Schedule</dt><dd>${schedule}</dd>
      <dt>Next fire</dt><dd>${fmtTime(j.next_fire_at)}</dd>
      <dt>Fires</dt><dd>${esc(j.fires)} (skipped ${esc(j.skipped)})</dd>
      <dt>Last outcome</dt><dd>${j.last_outcome ? pill(j.last_outcome.result) + " " + esc(j.last_outcome.detail || "") : "–"}</dd>
      <dt>Callback</dt><dd>${esc(cb.method || "")} ${esc(cb.url || "")}</dd>
      <dt>Body</dt><dd>${cb.body === undefined ? "–" : `<pre>${esc(typeof cb.body === "string" ? cb.body : JSON.stringify(cb.body, null, 2))}</pre>`}</dd>
      <dt>Labels</dt><dd>${labelTags(j.labels)}</dd>
      <dt>Created</dt><dd>${fmtTime(j.created_at)}</dd>
    </dl>`;
    document.getElementById("job-policies").innerHTML = policies(j);
    const next = j.next_fires || [];
    document.getElementById("next-fires").innerHTML = next.length === 0 ? `<p class="muted">None: ${j.state === "scheduled" ? "no occurrence is left" : "the job is " + esc(j.state)}.</p>` :
      `<table id="next-fires-table"><thead><tr><th>Fire</th><th>Scheduled</th><th>Goes out</th></tr></thead><tbody>` +
      next.map((f) => `<tr><td class="num">${esc(f.fire_seq)}</td><td class="time">${fmtTime(f.scheduled_at)}</td><td class="time">${fmtTime(f.fire_at)}</td></tr>`).join("") +
      `</tbody></table><p class="muted hint">As the job stands now, with its jitter and exclusions; "goes out" adds the jitter.</p>`;
    const fires = j.current_fires || [];
    document.getElementById("job-fires").innerHTML = fires.length === 0 ? `<p class="muted">None.</p>` :
      `<table id="current-fires"><thead><tr><th>Fire</th><th>State</th><th>Attempt</th><th>Next attempt</th><th>Last error</th></tr></thead><tbody>` +
      fires.map((f) => `<tr><td class="num">${esc(f.fire_seq)}</td><td>${pill(f.state)}</td><td class="num">${esc(f.attempt)}</td>
        <td>${fmtTime(f.next_attempt_at)}</td><td>${esc(f.last_error ? (f.last_error.error || f.last_error.class) : "–")}</td></tr>`).join("") + `</tbody></table>`;
  };
  const loadAttempts = pagedOutcomes(document.getElementById("attempts"), base, {
    id: "attempts", classes: ["success", "retryable", "permanent", "expired", "refused"], size: 20,
    head: ["Fire", "Attempt", "At", "Class", "Status", "Latency", "Error"],
    empty: "No attempts stored yet.",
    row: (x) => `<tr><td class="num">${esc(x.fire_seq)}</td><td class="num">${esc(x.attempt)}</td><td class="time">${fmtTime(x.at)}</td>
      <td>${pill(x.class)}${x.probe ? ` <span class="tag" title="a probe of the half-open breaker">probe</span>` : ""}</td>
      <td class="num">${esc(x.status_code || "–")}</td><td class="num">${esc(Math.round(x.latency_ms * 100) / 100)} ms</td><td>${esc(x.error || "")}</td></tr>`,
  });
  const loadDeferrals = pagedOutcomes(document.getElementById("deferrals"), base, {
    id: "deferrals", classes: ["deferred"], size: 10,
    head: ["Fire", "Attempt", "Held back at", "By", "Until", "Reason"],
    empty: "None: no callback of this job was held back.",
    row: (x) => `<tr><td class="num">${esc(x.fire_seq)}</td><td class="num">${esc(x.attempt)}</td><td class="time">${fmtTime(x.at)}</td>
      <td>${esc(DEFER_KINDS[x.error_kind] || x.error_kind || "–")}</td><td class="time">${fmtTime(x.next_attempt_at)}</td><td>${esc(x.error || "")}</td></tr>`,
  });
  actions.addEventListener("click", async (ev) => {
    const b = ev.target.closest("button[data-act]");
    if (!b) return;
    const act = b.dataset.act;
    for (const x of actions.querySelectorAll("button")) x.disabled = true;
    try {
      if (act === "cancel") await api("DELETE", base);
      else await api("POST", base + "/" + act);
      toast(act === "trigger" ? "Fired now; the schedule is unchanged" : `Job ${act === "cancel" ? "cancelled" : act + "d"}`);
      await load();
    } catch (e) { toast(e.message); } finally {
      for (const x of actions.querySelectorAll("button")) x.disabled = false;
    }
  });
  const unavailable = (el) => (e) => { el.textContent = e.status === 503 ? "Analytics unavailable: " + e.message : e.message; };
  await load().catch((e) => { document.getElementById("job-fields").textContent = e.message; });
  await Promise.all([
    loadAttempts().catch(unavailable(document.getElementById("attempts-body"))),
    loadDeferrals().catch(unavailable(document.getElementById("deferrals-body"))),
  ]);
  every(g, 3000, () => { load().catch(() => {}); loadAttempts().catch(() => {}); loadDeferrals().catch(() => {}); });
}

// ---------- routing ----------

async function route() {
  const g = ++gen;
  for (const t of timers) clearInterval(t);
  timers = [];
  onResize = null;
  if (!session) {
    const saved = sessionStorage.getItem(TOKEN_KEY);
    if (!saved) return renderSignIn();
    try { await signIn(saved); } catch (e) { sessionStorage.removeItem(TOKEN_KEY); session = null; return renderSignIn(); }
  }
  document.getElementById("who").textContent = session.admin ? "admin" : "namespace " + session.namespace;
  document.getElementById("signout").hidden = false;
  document.getElementById("nav").innerHTML = session.admin ? `<a href="#/">Namespaces</a>` : "";
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  try {
    if (parts[0] === "ns" && parts[1]) {
      if (parts[2] === "job" && parts[3]) return await renderJob(parts[1], parts.slice(3).join("/"));
      return await renderNamespace(parts[1], parts[2] || "jobs");
    }
    if (!session.admin) { location.hash = "#/ns/" + encodeURIComponent(session.namespace); return; }
    return await renderNamespaces();
  } catch (e) {
    // A page the user already left fails on its missing elements: say nothing.
    if (g !== gen) return;
    if (e.status === 401) { sessionStorage.removeItem(TOKEN_KEY); session = null; return renderSignIn("Signed out: the token is no longer valid."); }
    main.innerHTML = `<p class="error">${esc(e.message)}</p>`;
  }
}

document.getElementById("signout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  session = null;
  go("#/");
});
// The UTC switch redraws the page in the zone picked.
const utcSwitch = document.getElementById("utc");
utcSwitch.checked = utc;
utcSwitch.addEventListener("change", () => {
  utc = utcSwitch.checked;
  localStorage.setItem(UTC_KEY, utc ? "1" : "0");
  route();
});
let resizing = 0;
window.addEventListener("resize", () => {
  cancelAnimationFrame(resizing);
  resizing = requestAnimationFrame(() => onResize && onResize());
});
window.addEventListener("hashchange", route);
route();
