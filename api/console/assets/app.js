// chime console: a single-page app over chime's HTTP API. The token (admin
// token or namespace key) lives in sessionStorage only, for this tab.

const TOKEN_KEY = "chime.token";
const main = document.getElementById("main");
let session = null; // {token, admin, namespace}
let timers = [];    // polls of the page on screen, stopped on navigation
let gen = 0;        // counts navigations: a render still awaiting when the user moved on starts no polls

// ---------- helpers ----------

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function fmtTime(s) {
  if (!s) return "–";
  const d = new Date(s);
  return isNaN(d) ? esc(s) : d.toLocaleString();
}

function pill(state) {
  return `<span class="state ${esc(state)}">${esc(state || "–")}</span>`;
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

// lineChart draws series of {t: Date, v: number} between from and to, with
// vertical marks (breaker trips) at the given times.
function lineChart(series, marks, from, to, unit) {
  const W = 720, H = 220, L = 48, R = 12, T = 10, B = 26;
  const max = Math.max(1, ...series.flatMap((s) => s.values.map((p) => p.v)));
  const x = (t) => L + ((t - from) / Math.max(1, to - from)) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  let svg = `<svg class="chart" viewBox="0 0 ${W} ${H}" preserveAspectRatio="none" role="img">`;
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4, yy = y(v);
    svg += `<line x1="${L}" x2="${W - R}" y1="${yy}" y2="${yy}" stroke="#eceef3"/>`;
    svg += `<text x="${L - 6}" y="${yy + 4}" text-anchor="end">${esc(Math.round(v * 10) / 10)}${esc(unit)}</text>`;
  }
  for (let i = 0; i <= 6; i++) {
    const t = new Date(from.getTime() + ((to - from) * i) / 6);
    svg += `<text x="${x(t)}" y="${H - 6}" text-anchor="middle">${esc(t.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }))}</text>`;
  }
  for (const m of marks) {
    if (m.t < from || m.t > to) continue;
    svg += `<line class="trip" x1="${x(m.t)}" x2="${x(m.t)}" y1="${T}" y2="${H - B}" stroke="#c23b3b" stroke-dasharray="4 3"><title>${esc(m.label)}</title></line>`;
  }
  for (const s of series) {
    const pts = s.values.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
    svg += `<polyline class="series" data-name="${esc(s.name)}" fill="none" stroke="${s.color}" stroke-width="1.8" points="${pts}"/>`;
  }
  svg += `</svg><div class="legend">` + series.map((s) => `<span><i style="background:${s.color}"></i>${esc(s.name)}</span>`).join("") +
    (marks.length ? `<span><i style="background:#c23b3b"></i>breaker trips</span>` : "") + `</div>`;
  return svg;
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
    <div class="grid">
      <div class="card"><h2>Requests and failures, last hour</h2><div id="chart-requests" class="muted">Loading…</div></div>
      <div class="card"><h2>Latency p50 / p99, last hour</h2><div id="chart-latency" class="muted">Loading…</div></div>
    </div>
    <div class="card"><h2>Breaker history</h2><div id="history" class="muted">Loading…</div></div>
    <div class="tabs">
      <a href="#/ns/${encodeURIComponent(ns)}/jobs" class="${tab === "jobs" ? "on" : ""}" id="tab-jobs">Jobs</a>
      <a href="#/ns/${encodeURIComponent(ns)}/dead-letters" class="${tab === "dead-letters" ? "on" : ""}" id="tab-dead">Dead letters</a>
    </div>
    <div id="tab"></div>`;
  const loadBreaker = async () => {
    const b = await api("GET", nsPath(ns, "/breaker"));
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
          await loadHistory();
        } catch (e) { toast(e.message); } finally { btn.disabled = false; }
      });
    }
  } else {
    controls.innerHTML = `<h2>Breaker controls</h2><p class="muted">Only the admin token may force or reset the breaker.</p>`;
  }

  // The last hour, moving: every poll asks for the hour up to now (and a
  // minute ahead, so a transition stamped by a clock slightly ahead shows).
  const lastHour = () => {
    const to = new Date(), from = new Date(to.getTime() - 3600e3);
    return { from, to, query: `from=${encodeURIComponent(from.toISOString())}&to=${encodeURIComponent(new Date(to.getTime() + 60e3).toISOString())}` };
  };
  let trips = [];
  const loadHistory = async () => {
    const h = await api("GET", nsPath(ns, "/breaker/history?" + lastHour().query));
    trips = h.transitions.filter((t) => t.to === "open" || t.to === "forced_open").map((t) => ({ t: new Date(t.at), label: `${t.from} → ${t.to}: ${t.reason}` }));
    document.getElementById("history").innerHTML = h.transitions.length === 0
      ? `<p class="muted">No transitions in the last hour.</p>`
      : `<table id="history-table"><thead><tr><th>At</th><th>From</th><th>To</th><th>Trips</th><th>Reason</th></tr></thead><tbody>` +
        h.transitions.slice().reverse().map((t) => `<tr><td>${fmtTime(t.at)}</td><td>${pill(t.from)}</td><td>${pill(t.to)}</td><td class="num">${esc(t.consecutive_trips)}</td><td>${esc(t.reason)}</td></tr>`).join("") +
        `</tbody></table>`;
  };
  const loadCharts = async () => {
    const { from, to, query } = lastHour();
    const stats = await api("GET", nsPath(ns, "/stats?step=1m&" + query));
    const pts = stats.points.map((p) => ({ ...p, t: new Date(p.t) }));
    document.getElementById("chart-requests").innerHTML = lineChart([
      { name: "requests", color: "#3056d3", values: pts.map((p) => ({ t: p.t, v: p.requests })) },
      { name: "failures", color: "#c23b3b", values: pts.map((p) => ({ t: p.t, v: p.failures })) },
    ], trips, from, to, "");
    document.getElementById("chart-latency").innerHTML = lineChart([
      { name: "p50", color: "#1a7f4b", values: pts.map((p) => ({ t: p.t, v: p.p50_ms })) },
      { name: "p99", color: "#b7791f", values: pts.map((p) => ({ t: p.t, v: p.p99_ms })) },
    ], trips, from, to, " ms");
  };
  // Analytics may be starting or away: say so where the charts go, and keep
  // trying, so the page fills in once ClickHouse answers.
  const loadAnalytics = async () => {
    try {
      await loadHistory();
      await loadCharts();
    } catch (e) {
      const msg = e.status === 503 ? "Analytics unavailable: " + e.message : e.message;
      for (const id of ["chart-requests", "chart-latency", "history"]) document.getElementById(id).textContent = msg;
    }
  };
  await loadAnalytics();
  every(g, 10000, () => loadAnalytics().catch(() => {}));

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
    </div>
    <table id="jobs"><thead><tr><th>Job</th><th>State</th><th>Next fire</th><th>Fires</th><th>Last outcome</th><th>Created</th></tr></thead><tbody></tbody></table>
    <p><button id="jobs-more" hidden>More</button></p>`;
  let cursor = "";
  const body = el.querySelector("tbody");
  const load = async (reset) => {
    if (reset) { cursor = ""; body.innerHTML = ""; }
    const state = document.getElementById("job-state").value;
    const q = new URLSearchParams({ limit: "50" });
    if (state) q.set("state", state);
    if (cursor) q.set("cursor", cursor);
    const data = await api("GET", nsPath(ns, "/jobs?" + q));
    body.insertAdjacentHTML("beforeend", data.jobs.map((j) => `
      <tr class="click" data-id="${esc(j.id)}">
        <td><a href="#/ns/${encodeURIComponent(ns)}/job/${encodeURIComponent(j.id)}">${esc(j.id)}</a></td>
        <td>${pill(j.state)}</td><td>${fmtTime(j.next_fire_at)}</td><td class="num">${esc(j.fires)}</td>
        <td>${j.last_outcome ? pill(j.last_outcome.result) : "–"}</td><td>${fmtTime(j.created_at)}</td>
      </tr>`).join(""));
    if (!body.children.length) body.innerHTML = `<tr><td colspan="6" class="muted">No jobs.</td></tr>`;
    cursor = data.next_cursor;
    document.getElementById("jobs-more").hidden = !cursor;
    for (const tr of body.querySelectorAll("tr.click")) {
      tr.onclick = () => { location.hash = "#/ns/" + encodeURIComponent(ns) + "/job/" + encodeURIComponent(tr.dataset.id); };
    }
  };
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

async function renderJob(ns, id) {
  const g = gen;
  main.innerHTML = `<p><a href="#/ns/${encodeURIComponent(ns)}">← ${esc(ns)}</a></p>
    <h1>Job ${esc(id)} <span id="job-pill"></span></h1>
    <div class="row" id="job-actions">
      <button data-act="trigger" class="primary">Run now</button>
      <button data-act="pause">Pause</button>
      <button data-act="resume">Resume</button>
      <button data-act="cancel" class="danger">Cancel</button>
    </div>
    <div class="grid" style="margin-top:1rem">
      <div class="card"><h2>Job</h2><div id="job-fields" class="muted">Loading…</div></div>
      <div class="card"><h2>Fires in progress</h2><div id="job-fires"></div></div>
    </div>
    <div class="card"><h2>Attempts</h2><div id="attempts" class="muted">Loading…</div></div>`;
  const base = nsPath(ns, "/jobs/" + encodeURIComponent(id));
  const load = async () => {
    const j = await api("GET", base);
    document.getElementById("job-pill").innerHTML = pill(j.state);
    const s = j.schedule || {}, cb = j.callback || {};
    const schedule = s.cron ? `cron ${s.cron}${s.timezone ? " (" + s.timezone + ")" : ""}` : s.every ? `every ${s.every}` : s.at ? `at ${fmtTime(s.at)}` : "–";
    document.getElementById("job-fields").innerHTML = `<dl>
      <dt>State</dt><dd>${pill(j.state)}</dd>
      <dt>Schedule</dt><dd>${esc(schedule)}</dd>
      <dt>Next fire</dt><dd>${fmtTime(j.next_fire_at)}</dd>
      <dt>Fires</dt><dd>${esc(j.fires)} (skipped ${esc(j.skipped)})</dd>
      <dt>Last outcome</dt><dd>${j.last_outcome ? pill(j.last_outcome.result) + " " + esc(j.last_outcome.detail || "") : "–"}</dd>
      <dt>Callback</dt><dd>${esc(cb.method || "")} ${esc(cb.url || "")}</dd>
      <dt>Body</dt><dd>${cb.body === undefined ? "–" : `<pre>${esc(typeof cb.body === "string" ? cb.body : JSON.stringify(cb.body, null, 2))}</pre>`}</dd>
      <dt>Created</dt><dd>${fmtTime(j.created_at)}</dd>
    </dl>`;
    const fires = j.current_fires || [];
    document.getElementById("job-fires").innerHTML = fires.length === 0 ? `<p class="muted">None.</p>` :
      `<table id="current-fires"><thead><tr><th>Fire</th><th>State</th><th>Attempt</th><th>Next attempt</th><th>Last error</th></tr></thead><tbody>` +
      fires.map((f) => `<tr><td class="num">${esc(f.fire_seq)}</td><td>${pill(f.state)}</td><td class="num">${esc(f.attempt)}</td>
        <td>${fmtTime(f.next_attempt_at)}</td><td>${esc(f.last_error ? (f.last_error.error || f.last_error.class) : "–")}</td></tr>`).join("") + `</tbody></table>`;
  };
  const loadAttempts = async () => {
    const a = await api("GET", base + "/attempts");
    document.getElementById("attempts").innerHTML = a.attempts.length === 0 ? `<p class="muted">No attempts stored yet.</p>` :
      `<table id="attempts-table"><thead><tr><th>Fire</th><th>Attempt</th><th>At</th><th>Class</th><th>Status</th><th>Latency</th><th>Error</th></tr></thead><tbody>` +
      a.attempts.slice().reverse().map((x) => `<tr><td class="num">${esc(x.fire_seq)}</td><td class="num">${esc(x.attempt)}</td><td>${fmtTime(x.at)}</td>
        <td>${pill(x.class)}</td><td class="num">${esc(x.status_code || "–")}</td><td class="num">${esc(Math.round(x.latency_ms * 100) / 100)} ms</td><td>${esc(x.error || "")}</td></tr>`).join("") +
      `</tbody></table>`;
  };
  for (const b of document.querySelectorAll("#job-actions button")) {
    b.addEventListener("click", async () => {
      const act = b.dataset.act;
      try {
        if (act === "cancel") await api("DELETE", base);
        else await api("POST", base + "/" + act);
        toast(act === "trigger" ? "Fired now; the schedule is unchanged" : `Job ${act}d`);
        setTimeout(() => load().catch(() => {}), 500);
      } catch (e) { toast(e.message); }
    });
  }
  await load().catch((e) => { document.getElementById("job-fields").textContent = e.message; });
  await loadAttempts().catch((e) => { document.getElementById("attempts").textContent = e.status === 503 ? "Analytics unavailable: " + e.message : e.message; });
  every(g, 3000, () => { load().catch(() => {}); loadAttempts().catch(() => {}); });
}

// ---------- routing ----------

async function route() {
  const g = ++gen;
  for (const t of timers) clearInterval(t);
  timers = [];
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
window.addEventListener("hashchange", route);
route();
