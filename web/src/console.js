// Tessera's web console: polls the leading master's JSON API (docs/console-api.md) and draws
// the job, its cost curves (uPlot: drag to zoom, double-click to reset, hover for values), its
// nodes, checkpoints, failed tasks and logs. Plain browser JavaScript, no build step.
"use strict";

const POLL_MS = 1000;
const state = {
  since: 0,            // last history point received
  costByTrainer: {},   // trainer -> [[step], [cost]]
  evalByMetric: {},    // metric -> {pass: value}
  logNode: "",
  logSince: 0,
  logLines: [],
  nodesSeen: new Set(),
};
let costPlot = null;
let evalPlot = null;

const $ = (id) => document.getElementById(id);

async function getJson(path) {
  const res = await fetch(path, { cache: "no-store" });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error || `${path}: HTTP ${res.status}`);
  return body;
}

function fmtSeconds(s) {
  if (s === null || s === undefined || !isFinite(s)) return "–";
  s = Math.round(s);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  return h ? `${h}h ${m}m` : m ? `${m}m ${sec}s` : `${sec}s`;
}

// " · table emb: 216954 rows, 11.7 MiB (1616172 admitted, 1399218 evicted)": a sparse table on
// one pserver, with its limits' counts when it has any.
function tableStats(t) {
  const counts = t.admitted || t.evicted ? ` (${t.admitted} admitted, ${t.evicted} evicted)` : "";
  return ` · table ${t.name}: ${t.rows} rows, ${(t.bytes / 1048576).toFixed(1)} MiB${counts}`;
}

function fmtAge(ms) {
  return ms ? fmtSeconds((Date.now() - ms) / 1000) + " ago" : "–";
}

function cell(row, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
  return td;
}

// ---- job ----

function showJob(j) {
  state.archived = !!j.archived;
  $("job-name").textContent = j.job;
  document.title = `Tessera · ${j.job}`;
  $("pass").textContent =
    `${j.pass} / ${j.passes}${j.finished ? " (finished)" : j.archived ? " (the run ended here)" : ""}`;
  const t = j.tasks;
  $("tasks").textContent = `${t.done} / ${t.pending} / ${t.todo} / ${t.failed}`;
  $("rate").textContent = Math.round(j.samples_per_second).toLocaleString();
  $("time").textContent = `${fmtSeconds(j.elapsed_seconds)} · ${fmtSeconds(j.eta_seconds)}`;
  $('config').textContent = `${j.config.mode} · ${j.config.optimizer} · ${j.config.wire || 'f32'}`;
  $("progress-bar").style.width = `${(100 * j.progress).toFixed(1)}%`;
  $("status-line").textContent =
    `${j.dataset} · step ${j.step} · ${j.samples.toLocaleString()} samples · last cost ${j.last_cost.toFixed(4)}`;
}

// ---- charts (charts.js, shared with the platform's pages) ----

function drawCost() {
  costPlot = TesseraCharts.drawCost($("cost"), costPlot, state.costByTrainer);
}

function drawEval() {
  evalPlot = TesseraCharts.drawEval($("eval"), evalPlot, state.evalByMetric);
}

async function pollHistory() {
  for (let round = 0; round < 20; round++) {  // at most 20 x 5000 points per poll
    const h = await getJson(`/api/metrics?since=${state.since}`);
    TesseraCharts.addPoints(h.points, state.costByTrainer, state.evalByMetric);
    state.since = h.next;
    if (!h.more) break;
  }
  drawCost();
  drawEval();
}

// ---- nodes, checkpoints, tasks ----

function showNodes(list) {
  const body = $("nodes").querySelector("tbody");
  const cks = $("checkpoints").querySelector("tbody");
  body.replaceChildren();
  cks.replaceChildren();
  for (const n of list.nodes) {
    state.nodesSeen.add(n.node);
    const row = document.createElement("tr");
    row.dataset.node = n.node;
    row.dataset.tables = (n.stats && n.stats.tables || []).map((t) => `${t.name}:${t.rows}:${t.admitted}:${t.evicted}`)
      .join(" ");
    row.dataset.state = n.state;
    row.dataset.history = (n.history || []).map((h) => h.state).join(" ");
    cell(row, n.node);
    cell(row, n.address || "–");
    cell(row, String(n.epoch));
    cell(row, n.state, `state-${n.state}`);
    cell(row, (n.history || []).map((h) => `${h.state} ${new Date(h.at_ms).toLocaleTimeString()}`).join(" → "));
    cell(row, n.state === "lost" || n.state === "finished" || state.archived ? "–"
                                                         : `${n.seconds_since_heartbeat.toFixed(1)} s ago`);
    cell(row, n.stats ? `v${n.stats.version} · ${Math.round(n.stats.pushes_per_second)}/s · ` +
                        `${(n.stats.param_bytes / 1048576).toFixed(1)} MiB · ${n.stats.slots} slots` +
                        (n.stats.tables || []).map(tableStats).join("") : "");
    cell(row, String(n.restarts));
    const latest = (n.checkpoints || [])[0];
    cell(row, latest ? `v${latest.version}, ${fmtAge(latest.time_ms)}` : n.kind === "pserver" ? "none" : "");
    body.appendChild(row);
    if (n.kind === "pserver") {
      for (const [i, c] of (n.checkpoints || []).entries()) {
        const r = document.createElement("tr");
        cell(r, i === 0 ? n.node : "");
        cell(r, String(c.version));
        cell(r, new Date(c.time_ms).toLocaleTimeString());
        // A delta (incremental checkpoint) says so: its bytes are the rows changed since the one before.
        cell(r, (c.bytes ? `${(c.bytes / 1048576).toFixed(2)} MiB` : "–") +
                (c.chain && c.chain.length ? ` (delta ${c.chain.length} on v${c.chain[0].version})` : ""));
        cell(r, `${c.digest.slice(0, 16)}… ${c.digest_state || ""}`, c.digest_state === "verified" ? "state-alive"
                 : c.digest_state && c.digest_state !== "not visible from the master" ? "state-lost" : "");
        cell(r, i === 0 ? "newest" : "previous");
        cks.appendChild(r);
      }
    }
  }
  if (!cks.children.length) {
    const r = document.createElement("tr");
    cell(r, "no checkpoints recorded (pservers run without --checkpoint-dir)").colSpan = 6;
    cks.appendChild(r);
  }
  fillLogNodes();
  showReplicas(list.replicas);
}

// A replicated or elastic job: each shard's holders and state, the hosts, and recent failovers,
// handovers and copies.
function showReplicas(r) {
  $("replicas-panel").hidden = !r;
  if (!r) return;
  $("replicas-summary").textContent =
      `· ${r.replicas} ${r.replicas === 1 ? "copy" : "copies"} of each · map epoch ${r.map_epoch} · ` +
      `${r.failovers} ${r.failovers === 1 ? "failover" : "failovers"} · ${r.handovers} ${r.handovers === 1 ? "move" : "moves"}`;
  const shards = $("shards").querySelector("tbody");
  shards.replaceChildren();
  for (const s of r.shards) {
    const row = document.createElement("tr");
    row.dataset.shard = String(s.shard);
    row.dataset.state = s.state;
    cell(row, String(s.shard));
    cell(row, `host ${s.primary}`);
    cell(row, s.backups.length ? s.backups.map((h) => `host ${h}`).join(", ") : "–");
    cell(row, s.state === "moving" ? `moving to host ${s.moving_to}` : s.state,
         s.state === "ok" ? "state-alive" : s.state === "failing over" || s.state === "under-replicated"
                                                ? "state-lost" : "state-restarted");
    shards.appendChild(row);
  }
  const hosts = $("hosts").querySelector("tbody");
  hosts.replaceChildren();
  for (const h of r.hosts) {
    const row = document.createElement("tr");
    row.dataset.host = String(h.host);
    cell(row, `host ${h.host}` + (h.info && h.info.pid ? ` (pid ${h.info.pid})` : ""));
    cell(row, h.primaries.join(", ") || "–");
    cell(row, h.backups.join(", ") || "–");
    cell(row, h.leaving ? "leaving: handing its shards over" : "serving", h.leaving ? "state-restarted" : "state-alive");
    hosts.appendChild(row);
  }
  const changes = $("shard-changes").querySelector("tbody");
  changes.replaceChildren();
  const what = (c) => c.kind === "failover" ? `failover: host ${c.from} gone, host ${c.to} primary`
                    : c.kind === "handover" ? `moved: host ${c.from} handed it to host ${c.to}`
                    : c.kind === "copy" ? `copy made on host ${c.to}` : `copy on host ${c.from} dropped`;
  for (const c of [...r.changes].reverse().slice(0, 30)) {
    const row = document.createElement("tr");
    row.dataset.kind = c.kind;
    cell(row, new Date(c.at_ms).toLocaleTimeString());
    cell(row, String(c.shard));
    cell(row, what(c), c.kind === "failover" ? "state-lost" : "");
    cell(row, String(c.epoch));
    changes.appendChild(row);
  }
  $("shard-changes-none").style.display = r.changes.length ? "none" : "";
}

function showTasks(t) {
  const body = $("failed").querySelector("tbody");
  body.replaceChildren();
  for (const f of t.failed) {
    const row = document.createElement("tr");
    cell(row, String(f.id));
    cell(row, String(f.pass));
    cell(row, String(f.failures));
    cell(row, f.reason);
    body.appendChild(row);
  }
  $("failed-none").style.display = t.failed.length ? "none" : "";
}

// ---- logs ----

function fillLogNodes() {
  const select = $("log-node");
  const names = new Set(["master-0", ...state.nodesSeen]);
  const have = new Set([...select.options].map((o) => o.value));
  for (const n of [...names].sort()) {
    if (have.has(n)) continue;
    const o = document.createElement("option");
    o.value = o.textContent = n;
    select.appendChild(o);
  }
  if (!state.logNode && select.options.length) {
    const first = [...select.options].find((o) => o.value.startsWith("trainer")) || select.options[0];
    select.value = first.value;
    state.logNode = first.value;
  }
}

function showLogs() {
  const filter = $("log-filter").value;
  const lines = filter ? state.logLines.filter((l) => l.includes(filter)) : state.logLines;
  const pre = $("log-lines");
  const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  pre.textContent = lines.slice(-500).join("\n");
  if (atBottom) pre.scrollTop = pre.scrollHeight;
}

async function pollLogs() {
  if (!state.logNode || state.logBusy) return;  // one request at a time, or lines would repeat
  state.logBusy = true;
  const node = state.logNode;
  try {
    const l = await getJson(`/api/logs?node=${encodeURIComponent(node)}&since=${state.logSince}`);
    if (node !== state.logNode) return;
    state.logLines.push(...l.lines);
    if (state.logLines.length > 2000) state.logLines.splice(0, state.logLines.length - 2000);
    state.logSince = l.next;
  } catch (e) {
    state.logLines = [`(${e.message})`];
  } finally {
    state.logBusy = false;
  }
  showLogs();
}

$("log-node").addEventListener("change", (e) => {
  state.logNode = e.target.value;
  state.logSince = 0;
  state.logLines = [];
  pollLogs();
});
$("log-filter").addEventListener("input", showLogs);

// ---- the loop ----

async function poll() {
  try {
    showJob(await getJson("/api/job"));
    showNodes(await getJson("/api/nodes"));
    showTasks(await getJson("/api/tasks"));
    await pollHistory();
    await pollLogs();
  } catch (e) {
    // A standby (503) or a master being replaced: say so and keep polling.
    $("status-line").textContent = `waiting for the leading master: ${e.message}`;
  }
  setTimeout(poll, POLL_MS);
}

window.addEventListener("resize", () => {
  if (costPlot) costPlot.setSize({ width: TesseraCharts.chartWidth($("cost")), height: 260 });
  if (evalPlot) evalPlot.setSize({ width: TesseraCharts.chartWidth($("eval")), height: 260 });
});
poll();
