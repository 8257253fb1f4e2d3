// Tessera's platform pages (served by `tessera server`): log in or sign up, the jobs of your
// namespaces, a job with its live cost and evaluation (the console's charts, charts.js), its
// workers, events and logs, stop and scale for those allowed; your quota. Plain browser
// JavaScript, no build step; the REST API is docs/platform-api.md. The token lives in
// localStorage and goes in the Authorization header of every call.
"use strict";

const $ = (id) => document.getElementById(id);
const session = {
  get token() { return localStorage.getItem("tessera.token") || ""; },
  set token(t) { t ? localStorage.setItem("tessera.token", t) : localStorage.removeItem("tessera.token"); },
  me: null,  // GET /api/v1/me
};
let stopView = null;  // stops the current view's timers when the route changes

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

// One API call: `body` as JSON, or `bytes` (a Blob or a typed array: a data chunk, a code package)
// as application/octet-stream with `headers`. Resolves to the answer's JSON.
async function api(method, path, body, bytes, extraHeaders) {
  const headers = { ...(extraHeaders || {}) };
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (bytes !== undefined) headers["Content-Type"] = "application/octet-stream";
  const res = await fetch(`/api/v1${path}`, { method, headers, cache: "no-store",
                                              body: bytes !== undefined ? bytes : body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  const json = text ? JSON.parse(text) : {};
  if (!res.ok) {
    const e = json.error || {};
    if (res.status === 401 && path !== "/login") { session.token = ""; location.hash = "#/login"; }
    throw new ApiError(res.status, e.code || "", e.message || `HTTP ${res.status}`);
  }
  return json;
}

function showError(e) {
  const el = $("error");
  if (!e) { el.hidden = true; el.textContent = ""; return; }
  el.textContent = e.message || String(e);
  el.hidden = false;
}

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) el.append(c.nodeType ? c : String(c));
  return el;
}

function fmtTime(ms) { return ms ? new Date(ms).toLocaleString() : "–"; }
function fmtAgo(ms) {
  if (!ms) return "–";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  return s < 90 ? `${s} s ago` : s < 5400 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`;
}
function roleIn(ns) {
  if (!session.me) return "";
  if (session.me.user.admin) return "admin";
  const m = session.me.namespaces.find((n) => n.name === ns);
  return m ? m.role : "";
}
const canChange = (ns) => ["member", "admin"].includes(roleIn(ns));

// ---- login ----

function loginView(view) {
  $("nav").hidden = true;
  $("logout").hidden = true;
  $("who").textContent = "";
  const name = h("input", { id: "login-name", autocomplete: "username", required: true });
  const pw = h("input", { id: "login-password", type: "password", autocomplete: "current-password", required: true });
  const go = async (signup) => {
    showError(null);
    try {
      if (signup) await api("POST", "/signup", { name: name.value, password: pw.value });
      const t = await api("POST", "/login", { name: name.value, password: pw.value });
      session.token = t.token;
      localStorage.setItem("tessera.token-id", t.token_id);
      // Back to the page that asked for a login (a job's link from `tessera submit`), if any.
      location.hash = sessionStorage.getItem("tessera.return-to") || "#/jobs";
      sessionStorage.removeItem("tessera.return-to");
    } catch (e) { showError(e); }
  };
  const form = h("form", { class: "card login", onsubmit: (ev) => { ev.preventDefault(); go(false); } },
                 h("h1", {}, "Log in to Tessera"),
                 h("label", {}, "User name", name), h("label", {}, "Password", pw),
                 h("div", { class: "toolbar" },
                   h("button", { type: "submit", id: "login-button" }, "Log in"),
                   h("button", { type: "button", class: "secondary", id: "signup-button",
                                 onclick: () => go(true) }, "Sign up")),
                 h("p", { class: "muted" }, "New here? Choose a name (a-z, 0-9, -) and a password of 8 characters or more, then Sign up."));
  view.replaceChildren(form);
  name.focus();
}

// ---- jobs ----

async function jobsView(view, params) {
  const namespaces = session.me.namespaces.map((n) => n.name);
  const ns = params.get("ns") || namespaces[0] || session.me.user.name;
  const state = params.get("state") || "";
  const owner = params.get("owner") || "";
  const nsSelect = h("select", { id: "filter-ns", "aria-label": "namespace" },
                     namespaces.map((n) => h("option", { value: n, selected: n === ns }, n)));
  const stateSelect = h("select", { id: "filter-state", "aria-label": "state" },
                        ["", "queued", "starting", "running", "succeeded", "failed", "stopped"].map(
                          (s) => h("option", { value: s, selected: s === state }, s || "any state")));
  const ownerInput = h("input", { id: "filter-owner", "aria-label": "owner", placeholder: "anyone", value: owner, style: "width: 9em" });
  const apply = () => {
    location.hash = `#/jobs?ns=${nsSelect.value}${stateSelect.value ? `&state=${stateSelect.value}` : ""}` +
                    `${ownerInput.value ? `&owner=${encodeURIComponent(ownerInput.value)}` : ""}`;
  };
  nsSelect.addEventListener("change", apply);
  stateSelect.addEventListener("change", apply);
  ownerInput.addEventListener("change", apply);
  const table = h("div", { id: "jobs" }, h("p", { class: "muted" }, "loading…"));
  view.replaceChildren(h("h1", {}, "Jobs"),
                       h("div", { class: "toolbar" }, h("label", {}, "Namespace", nsSelect), h("label", {}, "State", stateSelect),
                         h("label", {}, "Submitted by", ownerInput)),
                       table);
  const draw = async () => {
    const list = await api("GET", `/namespaces/${ns}/jobs?limit=1000${state ? `&state=${state}` : ""}`);
    if (owner) list.jobs = list.jobs.filter((j) => j.owner === owner);
    if (list.jobs.length === 0) {
      table.replaceChildren(h("div", { class: "empty" },
        state || owner ? `No ${state} jobs in ${ns}${owner ? ` submitted by ${owner}` : ""}.`
                       : `No jobs in ${ns} yet. Submit one from the Submit page, with \`tessera submit\`, or from a notebook.`));
      return;
    }
    const rows = list.jobs.map((j) => h("tr", { "data-job": j.id },
      h("td", {}, h("a", { href: `#/job/${j.id}` }, j.id)),
      h("td", { class: `state-${j.state}` }, j.state),
      h("td", {}, `${j.trainers} / ${j.spec.trainers}`),
      h("td", {}, j.spec.model || j.spec.command || ""),
      h("td", {}, j.owner),
      h("td", {}, fmtAgo(j.submitted_ms)),
      h("td", { class: "muted" }, (j.reason || "").split("\n")[0])));
    table.replaceChildren(h("table", {}, h("thead", {}, h("tr", {}, ["job", "state", "trainers", "runs", "owner", "submitted", "why"].map((t) => h("th", {}, t)))),
                            h("tbody", {}, rows)));
  };
  await draw();
  const timer = setInterval(() => draw().catch(showError), 3000);
  return () => clearInterval(timer);
}

// ---- one job ----

async function jobView(view, id) {
  const st = { since: 0, costByTrainer: {}, evalByMetric: {}, costPlot: null, evalPlot: null, logNode: "",
               logOffset: 0, logText: "" };
  let job = await api("GET", `/jobs/${id}`);
  const allowed = canChange(job.namespace);
  const cards = h("div", { class: "cards" });
  const reason = h("p", { id: "job-reason", class: "muted" });
  const cost = h("div", { id: "cost", "data-points": "0" });
  const evalEl = h("div", { id: "eval", "data-points": "0" });
  const noCost = h("p", { class: "muted" }, "No cost yet: the trainers report it about once a second while they train.");
  const noEval = h("p", { class: "muted" }, job.spec.eval_dataset ? "No evaluation yet: one comes after each pass."
                                                                   : "No evaluation: the job has no evaluation data set.");
  const workers = h("div", { id: "workers" });
  const events = h("div", { id: "events" });
  const logSelect = h("select", { id: "log-node", "aria-label": "log" });
  const follow = h("input", { id: "log-follow", type: "checkbox", checked: true });
  const log = h("pre", { id: "log", class: "log", tabindex: "0" });
  const actions = h("div", { class: "toolbar" });
  if (allowed) {
    const n = h("input", { id: "scale-n", type: "number", min: "1", max: "256", value: String(job.spec.trainers),
                           "aria-label": "trainers", style: "width: 6em" });
    actions.append(
      h("label", {}, "Trainers", n),
      h("button", { type: "button", id: "scale-button", class: "secondary",
                    onclick: () => act(() => api("POST", `/jobs/${id}/scale`, { trainers: Number(n.value) })) }, "Scale"),
      h("button", { type: "button", id: "stop-button", class: "danger",
                    onclick: () => act(() => api("POST", `/jobs/${id}/stop`)) }, "Stop"));
  }
  async function act(fn) {
    showError(null);
    try { await fn(); await refresh(); } catch (e) { showError(e); }
  }
  const pickLog = (node) => { st.logNode = node; st.logOffset = 0; st.logText = ""; log.textContent = ""; };
  logSelect.addEventListener("change", () => { st.logPicked = true; pickLog(logSelect.value); pollLog().catch(showError); });
  view.replaceChildren(
    h("h1", {}, `Job ${id}`), reason, cards, actions,
    h("div", { class: "charts" },
      h("div", { class: "card" }, h("h2", {}, "cost per trainer and their average"), noCost, cost),
      h("div", { class: "card" }, h("h2", {}, "evaluation per pass"), noEval, evalEl)),
    h("h2", {}, "Workers"), workers,
    h("h2", {}, "Logs"), h("div", { class: "toolbar" }, h("label", {}, "Process", logSelect),
                           h("label", {}, h("span", {}, "Follow"), follow)), log,
    h("h2", {}, "History"), events);

  function drawJob() {
    document.title = `Tessera · ${id}`;
    const spec = job.spec;
    cards.replaceChildren(...[
      ["state", h("span", { id: "job-state", class: `state-${job.state}` }, job.state)],
      ["trainers now / most", `${job.trainers} / ${spec.trainers}`],
      ["runs", spec.model ? `model ${spec.model}` : spec.command],
      ["mode · optimizer", `${spec.mode} · ${spec.optimizer}`],
      ["data set", spec.dataset + (spec.eval_dataset ? ` (eval ${spec.eval_dataset})` : "")],
      ["submitted", fmtTime(job.submitted_ms)], ["started", fmtTime(job.started_ms)], ["ended", fmtTime(job.ended_ms)],
    ].map(([label, value]) => h("div", { class: "card" }, h("div", { class: "label" }, label), h("div", { class: "big" }, value))));
    reason.textContent = job.reason || "";
    const st2 = job.workers && job.workers.status;
    const nodes = (job.workers && job.workers.nodes) || [];
    workers.replaceChildren(nodes.length === 0 ? h("div", { class: "empty" }, "No worker has reported yet.") :
      h("table", {}, h("thead", {}, h("tr", {}, ["process", "state", "restarts", "since", "newest checkpoint"].map((t) => h("th", {}, t)))),
        h("tbody", {}, nodes.map((n) => {
          const ck = (n.checkpoints || [])[0];
          return h("tr", { "data-node": `${n.kind}-${n.name}` },
            h("td", {}, `${n.kind}-${n.name}`), h("td", { class: `state-${n.state === "alive" ? "running" : n.state}` }, n.state),
            h("td", {}, String(n.restarts || 0)), h("td", {}, fmtAgo(n.since_ms)),
            h("td", {}, ck ? `v${ck.version}, ${fmtAgo(ck.time_ms)}` : n.kind === "pserver" ? "none yet" : ""));
        }))));
    if (job.ended_ms && nodes.length) workers.prepend(h("p", { class: "muted" }, "As the job's processes last reported them before it ended."));
    if (st2) workers.prepend(h("p", { class: "muted", id: "progress" },
      `pass ${(st2.pass ?? 0) + 1} of ${st2.passes} · step ${st2.step} · ${st2.samples} samples · tasks ${st2.done} of ${st2.tasks} done, ${st2.failed} failed` +
      ((st2.failedTasks || []).length ? ` · failed tasks: ${st2.failedTasks.map((t) => t.id ?? t).join(", ")}` : "")));
    events.replaceChildren(h("table", {}, h("tbody", {}, (job.events || []).map((e) =>
      h("tr", {}, h("td", {}, fmtTime(e.time_ms)), h("td", { class: `state-${e.state}` }, e.state), h("td", {}, e.reason))))));
  }
  async function refresh() {
    job = await api("GET", `/jobs/${id}`);
    drawJob();
  }
  async function pollMetrics() {
    for (let round = 0; round < 20; round++) {
      const m = await api("GET", `/jobs/${id}/metrics?since=${st.since}`);
      TesseraCharts.addPoints(m.points, st.costByTrainer, st.evalByMetric);
      st.since = m.next;
      if (!m.more) break;
    }
    st.costPlot = TesseraCharts.drawCost(cost, st.costPlot, st.costByTrainer);
    st.evalPlot = TesseraCharts.drawEval(evalEl, st.evalPlot, st.evalByMetric);
    noCost.hidden = !!st.costPlot;
    noEval.hidden = !!st.evalPlot;
  }
  async function pollLog() {
    const logs = await api("GET", `/jobs/${id}/logs`);
    const names = logs.logs.map((l) => l.node);
    if (names.join() !== [...logSelect.options].map((o) => o.value).join()) {
      logSelect.replaceChildren(...names.map((n) => h("option", { value: n }, n)));
      // Until the user picks one: trainer-0's (the user's code), once it exists.
      const wanted = names.includes("trainer-0") ? "trainer-0" : names[0] || "";
      if (!st.logPicked && st.logNode !== wanted) pickLog(wanted);
      logSelect.value = st.logNode;
    }
    if (!st.logNode) { log.textContent = "No logs yet: the job has not started."; return; }
    if (st.logOffset > 0 && !follow.checked) return;
    for (let round = 0; round < 8; round++) {
      const t = await api("GET", `/jobs/${id}/logs/${st.logNode}?offset=${st.logOffset}`);
      if (!t.text) break;
      st.logText = (st.logText + t.text).slice(-200000);
      st.logOffset = t.next;
    }
    const atEnd = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.textContent = st.logText;
    if (atEnd) log.scrollTop = log.scrollHeight;
  }
  drawJob();
  const tick = async () => {
    try {
      await refresh();
      await pollMetrics();
      await pollLog();
    } catch (e) { showError(e); }
  };
  await tick();
  const timer = setInterval(tick, 1000);
  return () => clearInterval(timer);
}

// ---- submit ----

const STARTER = `# A PyTorch trainer: every trainer of the job runs this file, with the job's coordinates in
# its environment (tessera.init() reads them). The parameters live on the pservers; each step
# pushes gradients there and pulls fresh values; the cost you pass to opt.step() is what the
# job's page draws.
import torch
import torch.nn.functional as F
import tessera

torch.manual_seed(0)
tessera.init()
model = torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
opt = tessera.Optimizer(model)   # the job's optimizer, on the pservers
for batch in tessera.reader().batches(64):
    pixels, labels, _ = tessera.decode_images(batch)   # image data sets (idx format)
    x = torch.from_numpy(pixels).float().div_(255.0)
    y = torch.from_numpy(labels)
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step(samples=len(batch), cost=loss.item())
tessera.finish()
`;

// A tar archive (ustar) holding one file, as bytes.
function tarOf(name, text) {
  const data = new TextEncoder().encode(text);
  const header = new Uint8Array(512);
  const put = (at, len, str) => { const b = new TextEncoder().encode(str); header.set(b.subarray(0, len), at); };
  const octal = (n, len) => n.toString(8).padStart(len - 1, "0") + "\0";
  put(0, 100, name);
  put(100, 8, octal(0o644, 8));
  put(108, 8, octal(0, 8));
  put(116, 8, octal(0, 8));
  put(124, 12, octal(data.length, 12));
  put(136, 12, octal(0, 12));
  put(148, 8, "        ");
  put(156, 1, "0");
  put(257, 6, "ustar\0");
  put(263, 2, "00");
  const sum = header.reduce((a, b) => a + b, 0);
  put(148, 8, sum.toString(8).padStart(6, "0") + "\0 ");
  const padded = Math.ceil(data.length / 512) * 512;
  const out = new Uint8Array(512 + padded + 1024);
  out.set(header, 0);
  out.set(data, 512);
  return out;
}

function editorReady() {
  if (window.TesseraEditor) return Promise.resolve(window.TesseraEditor);
  return new Promise((resolve) => window.addEventListener("tessera-editor", () => resolve(window.TesseraEditor), { once: true }));
}

async function submitView(view, params) {
  const namespaces = session.me.namespaces.filter((n) => canChange(n.name)).map((n) => n.name);
  if (namespaces.length === 0) {
    view.replaceChildren(h("h1", {}, "Submit a job"), h("div", { class: "empty" }, "Your roles let you watch jobs, not submit them."));
    return;
  }
  const ns = params.get("ns") || namespaces[0];
  if (!namespaces.includes(ns)) {
    view.replaceChildren(h("h1", {}, "Submit a job"),
                         h("div", { class: "empty" }, `Your role in ${ns} lets you watch its jobs, not submit them.`));
    return;
  }
  const datasets = (await api("GET", `/namespaces/${ns}/datasets`)).datasets;
  const dsName = (d) => (d.shared ? `${d.namespace}/${d.name}` : d.name);
  const field = (label, el) => h("label", {}, label, el);
  const f = {
    name: h("input", { id: "submit-name", placeholder: "code", pattern: "[a-z][a-z0-9-]{0,31}" }),
    dataset: h("select", { id: "submit-dataset", required: true }, datasets.map((d) => h("option", { value: dsName(d) }, dsName(d)))),
    eval: h("select", { id: "submit-eval" }, h("option", { value: "" }, "none"), datasets.map((d) => h("option", { value: dsName(d) }, dsName(d)))),
    mode: h("select", { id: "submit-mode" }, ["sync", "async", "ssp:2", "ssp:8"].map((m) => h("option", { value: m }, m))),
    optimizer: h("input", { id: "submit-optimizer", value: "adam:lr=0.001" }),
    passes: h("input", { id: "submit-passes", type: "number", min: "1", max: "1000", value: "2" }),
    trainers: h("input", { id: "submit-trainers", type: "number", min: "1", max: "256", value: "2" }),
    trainersMin: h("input", { id: "submit-trainers-min", type: "number", min: "1", max: "256", value: "2" }),
    pservers: h("input", { id: "submit-pservers", type: "number", min: "1", max: "64", value: "1" }),
    priority: h("input", { id: "submit-priority", type: "number", min: "-1000", max: "1000", value: "0" }),
    cpu: h("input", { id: "submit-cpu", type: "number", min: "0.1", step: "0.1", value: "0.5" }),
    memory: h("input", { id: "submit-memory", type: "number", min: "64", step: "64", value: "512" }),
    gpus: h("input", { id: "submit-gpus", type: "number", min: "0", value: "0" }),
  };
  const editorEl = h("div", { id: "editor", class: "editor" });
  const form = h("form", { class: "card", id: "submit-form" },
    h("div", { class: "toolbar" }, field("Namespace", h("span", { class: "big" }, ns)), field("Name", f.name),
      field("Data set", f.dataset), field("Evaluate on", f.eval), field("Mode", f.mode), field("Optimizer", f.optimizer)),
    h("div", { class: "toolbar" }, field("Passes", f.passes), field("Pservers", f.pservers), field("Trainers (most)", f.trainers),
      field("Trainers (fewest)", f.trainersMin), field("Priority", f.priority), field("CPU per process", f.cpu),
      field("Memory per process (MB)", f.memory), field("GPUs per trainer", f.gpus)),
    h("h2", {}, "train.py"), editorEl,
    h("div", { class: "toolbar" }, h("button", { type: "submit", id: "submit-button" }, "Submit")));
  view.replaceChildren(h("h1", {}, "Submit a job"),
    datasets.length ? form : h("div", { class: "empty" }, `No data sets in ${ns} yet: upload one on the Data sets page first.`));
  if (!datasets.length) return;
  const editor = (await editorReady()).create(editorEl, STARTER);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    showError(null);
    try {
      const tar = tarOf("train.py", editor.text());
      const digest = await sha256Hex(new Blob([tar]));
      await api("PUT", `/namespaces/${ns}/packages/${digest}`, undefined, tar);
      const spec = { package: digest, command: "/usr/bin/python3 train.py", dataset: f.dataset.value, mode: f.mode.value,
                     optimizer: f.optimizer.value, passes: Number(f.passes.value), pservers: Number(f.pservers.value),
                     trainers: Number(f.trainers.value), trainers_min: Math.min(Number(f.trainersMin.value), Number(f.trainers.value)),
                     priority: Number(f.priority.value),
                     resources: { cpu: Number(f.cpu.value), memory_mb: Number(f.memory.value), gpus: Number(f.gpus.value) } };
      if (f.name.value) spec.name = f.name.value;
      if (f.eval.value) spec.eval_dataset = f.eval.value;
      const job = await api("POST", `/namespaces/${ns}/jobs`, spec);
      location.hash = `#/job/${job.id}`;
    } catch (e) { showError(e); }
  });
}

// ---- data sets ----

const CHUNK = 4 << 20;  // the server's most per request

async function sha256Hex(blob) {
  const digest = await crypto.subtle.digest("SHA-256", await blob.arrayBuffer());
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

// Sends `file` as `role` of upload `up` from what the server has, calling progress(bytes sent).
async function sendFile(up, role, file, progress) {
  let offset = up.files[role].received;
  while (offset < file.size) {
    const piece = file.slice(offset, Math.min(file.size, offset + CHUNK));
    const got = await api("PUT", `/uploads/${up.id}/files/${role}?offset=${offset}`, undefined, piece,
                          { "X-Chunk-SHA256": await sha256Hex(piece) });
    offset = got.received;
    progress(offset);
  }
}

const FORMAT_FILES = { text: ["input"], csv: ["input"], libsvm: ["input"], idx: ["images", "labels"], list: ["archive"] };

async function datasetsView(view, params) {
  const ns = params.get("ns") || session.me.user.name;
  const allowed = canChange(ns);
  const list = h("div", { id: "datasets" }, h("p", { class: "muted" }, "loading…"));
  const preview = h("div", { id: "preview" });
  const form = h("form", { class: "card", id: "upload-form" });
  const progress = h("progress", { id: "upload-progress", max: "1", value: "0", hidden: true, style: "width: 100%" });
  const status = h("p", { id: "upload-status", class: "muted" });
  if (allowed) {
    const name = h("input", { id: "upload-name", required: true, "aria-label": "data set name" });
    const format = h("select", { id: "upload-format", "aria-label": "format" },
                     Object.keys(FORMAT_FILES).map((f) => h("option", { value: f }, f)));
    const files = h("div", { class: "toolbar" });
    const drawFiles = () => files.replaceChildren(...FORMAT_FILES[format.value].map((role) =>
      h("label", {}, role, h("input", { type: "file", id: `upload-file-${role}`, "data-role": role, required: true }))));
    format.addEventListener("change", drawFiles);
    drawFiles();
    form.append(h("h2", {}, "Upload a data set"),
                h("div", { class: "toolbar" }, h("label", {}, "Name", name), h("label", {}, "Format", format)), files,
                h("button", { type: "submit", id: "upload-button" }, "Upload"), progress, status,
                h("p", { class: "muted" }, "Interrupted (a reload, a dropped link)? Upload the same files under the same name again: it goes on from where the server stopped."));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      showError(null);
      const chosen = [...files.querySelectorAll("input[type=file]")].map((i) => [i.dataset.role, i.files[0]]);
      const total = chosen.reduce((n, [, f]) => n + f.size, 0);
      try {
        const pending = (await api("GET", `/namespaces/${ns}/uploads`)).uploads.find((u) => u.name === name.value && u.state === "receiving");
        let up = pending;
        if (up && !chosen.every(([role, f]) => up.files[role] && up.files[role].size === f.size)) {
          throw new Error(`an unfinished upload of ${name.value} with other files is on the server; delete it first`);
        }
        if (!up) {
          const spec = { name: name.value, format: format.value, files: {} };
          for (const [role, f] of chosen) spec.files[role] = { size: f.size };
          up = await api("POST", `/namespaces/${ns}/uploads`, spec);
        }
        progress.hidden = false;
        let before = 0;
        const already = chosen.reduce((n, [role]) => n + up.files[role].received, 0);
        status.textContent = already ? `resuming: the server has ${already} of ${total} bytes` : `sending ${total} bytes`;
        for (const [role, f] of chosen) {
          await sendFile(up, role, f, (sent) => { progress.value = (before + sent) / total; });
          before += f.size;
        }
        await api("POST", `/uploads/${up.id}/finish`);
        status.textContent = "the server is importing it…";
        for (let i = 0; i < 600; i++) {
          const u = await api("GET", `/uploads/${up.id}`);
          if (u.state === "done") break;
          if (u.state === "failed") throw new Error(`the server could not import it: ${u.error}`);
          await new Promise((r) => setTimeout(r, 500));
        }
        status.textContent = `data set ${name.value} is ready` + (already ? ` (resumed at ${already} bytes)` : "");
        await draw();
      } catch (e) { showError(e); status.textContent = "stopped; upload the same files again to resume"; }
    });
  }
  async function showPreview(name) {
    const p = await api("GET", `/namespaces/${ns}/datasets/${name}/preview?n=5`);
    preview.replaceChildren(h("h2", {}, `First records of ${name}`),
      h("table", { id: "preview-table" }, h("tbody", {}, p.records.map((r, i) => h("tr", {}, h("td", {}, String(i + 1)), h("td", {}, JSON.stringify(r)))))));
  }
  async function draw() {
    const d = await api("GET", `/namespaces/${ns}/datasets`);
    if (d.datasets.length === 0) {
      list.replaceChildren(h("div", { class: "empty" }, `No data sets in ${ns} yet.${allowed ? " Upload one below." : ""}`));
      return;
    }
    list.replaceChildren(h("table", {}, h("thead", {}, h("tr", {}, ["name", "format", "records", "size", "sharing", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, d.datasets.map((x) => h("tr", { "data-dataset": x.name },
        h("td", {}, x.shared ? `${x.namespace}/${x.name}` : x.name), h("td", {}, x.format), h("td", {}, String(x.records)),
        h("td", {}, `${(x.bytes / 1048576).toFixed(1)} MiB`),
        h("td", {}, x.shared ? `shared by ${x.owner}` : (x.shared_with || []).join(", ")),
        h("td", {},
          h("button", { type: "button", class: "secondary", onclick: () => showPreview(x.name).catch(showError) }, "Preview"),
          roleIn(ns) === "admin" && !x.shared ? h("button", { type: "button", class: "secondary", "data-share": x.name, onclick: async () => {
            const other = prompt(`Share ${x.name} (read-only) with which namespace?`);
            if (!other) return;
            try { await api("PUT", `/namespaces/${ns}/datasets/${x.name}/shares/${other}`); await draw(); } catch (e) { showError(e); }
          } }, "Share") : null,
          allowed && !x.shared ? h("button", { type: "button", class: "danger", "data-delete": x.name, onclick: async () => {
            if (!confirm(`Delete data set ${x.name}?`)) return;
            try { await api("DELETE", `/namespaces/${ns}/datasets/${x.name}`); await draw(); } catch (e) { showError(e); }
          } }, "Delete") : null))))));
  }
  view.replaceChildren(h("h1", {}, `Data sets of ${ns}`), list, preview, allowed ? form : h("p", { class: "muted" }, "Your role here lets you read data sets, not upload them."));
  await draw();
}

// ---- administration: members of a namespace (its admins), users and quotas (server admins) ----

async function adminView(view, params) {
  const admin = session.me.user.admin;
  const mine = session.me.namespaces.filter((n) => n.role === "admin").map((n) => n.name);
  if (!admin && mine.length === 0) {
    view.replaceChildren(h("h1", {}, "Administration"), h("div", { class: "empty" }, "You administer no namespace."));
    return;
  }
  const ns = params.get("ns") || mine[0] || session.me.user.name;
  const parts = [h("h1", {}, "Administration")];
  const act = async (fn) => { showError(null); try { await fn(); await route(); } catch (e) { showError(e); } };
  // Members of the namespace.
  const members = (await api("GET", `/namespaces/${ns}/members`)).members;
  const who = h("input", { id: "member-name", "aria-label": "user name", placeholder: "user name" });
  const role = h("select", { id: "member-role", "aria-label": "role" }, ["viewer", "member", "admin"].map((r) => h("option", { value: r }, r)));
  parts.push(h("h2", {}, `Members of ${ns}`),
    h("table", { id: "members" }, h("tbody", {}, members.map((m) => h("tr", { "data-member": m.user },
      h("td", {}, m.user), h("td", {}, m.role),
      h("td", {}, m.user === session.me.user.name ? "" : h("button", { type: "button", class: "secondary",
        onclick: () => act(() => api("DELETE", `/namespaces/${ns}/members/${m.user}`)) }, "Remove")))))),
    h("form", { class: "toolbar", onsubmit: (ev) => { ev.preventDefault(); act(() => api("PUT", `/namespaces/${ns}/members/${who.value}`, { role: role.value })); } },
      h("label", {}, "User", who), h("label", {}, "Role", role), h("button", { type: "submit", id: "member-add" }, "Give the role")));
  if (admin) {
    const users = (await api("GET", "/users")).users;
    parts.push(h("h2", {}, "Users"),
      h("table", { id: "users" }, h("thead", {}, h("tr", {}, ["user", "administrator", "approved", "signed up", ""].map((t) => h("th", {}, t)))),
        h("tbody", {}, users.map((u) => h("tr", { "data-user": u.name }, h("td", {}, u.name), h("td", {}, u.admin ? "yes" : ""),
          h("td", {}, u.approved ? "yes" : "waiting"), h("td", {}, fmtTime(u.created_ms)),
          h("td", {}, u.approved ? "" : h("button", { type: "button", onclick: () => act(() => api("POST", `/users/${u.name}/approve`)) }, "Approve")))))));
    const q = await api("GET", `/namespaces/${ns}/quota`);
    const inputs = {};
    const keys = ["jobs", "trainers", "pservers", "cpu", "memory_mb", "gpus", "storage_mb"];
    for (const k of keys) inputs[k] = h("input", { id: `quota-${k}`, type: "number", min: "0", step: k === "cpu" ? "0.5" : "1",
                                                   value: q.limits[k] ?? "", placeholder: "no limit", style: "width: 8em" });
    parts.push(h("h2", {}, `Quota of ${ns}`),
      h("form", { class: "toolbar", id: "quota-form", onsubmit: (ev) => {
        ev.preventDefault();
        const limits = {};
        for (const k of keys) if (inputs[k].value !== "") limits[k] = Number(inputs[k].value);
        act(() => api("PUT", `/namespaces/${ns}/quota`, limits));
      } }, keys.map((k) => h("label", {}, k, inputs[k])), h("button", { type: "submit", id: "quota-save" }, "Save the quota")));
  }
  view.replaceChildren(...parts);
  view.dataset.rendered = String(Number(view.dataset.rendered || 0) + 1);  // tests wait for a fresh rendering
}

// ---- quota ----

async function quotaView(view, params) {
  const ns = params.get("ns") || session.me.user.name;
  const q = await api("GET", `/namespaces/${ns}/quota`);
  const rows = ["jobs", "trainers", "pservers", "cpu", "memory_mb", "gpus", "storage_mb"].map((k) => {
    const used = q.usage[k] ?? 0, limit = q.limits[k];
    return h("tr", { "data-resource": k }, h("td", {}, k), h("td", {}, String(used)), h("td", {}, limit === undefined ? "no limit" : String(limit)),
             h("td", {}, limit ? `${Math.round((100 * used) / limit)}%` : "–"));
  });
  view.replaceChildren(h("h1", {}, `Quota of ${ns}`),
                       h("table", { id: "quota" }, h("thead", {}, h("tr", {}, ["resource", "in use", "limit", "used"].map((t) => h("th", {}, t)))),
                         h("tbody", {}, rows)));
}

// ---- routing ----

async function route() {
  if (stopView) { stopView(); stopView = null; }
  showError(null);
  const view = $("view");
  const [path, query] = (location.hash.slice(1) || "/jobs").split("?");
  const params = new URLSearchParams(query || "");
  if (!session.token && path !== "/login") sessionStorage.setItem("tessera.return-to", location.hash || "#/jobs");
  if (!session.token || path === "/login") return loginView(view);
  try {
    session.me = await api("GET", "/me");
  } catch (e) {
    return loginView(view);
  }
  $("nav").hidden = false;
  $("logout").hidden = false;
  $("who").textContent = `${session.me.user.name}${session.me.user.admin ? " (administrator)" : ""}`;
  for (const a of document.querySelectorAll("[data-nav]")) a.classList.toggle("active", path.startsWith(`/${a.dataset.nav}`));
  try {
    if (path.startsWith("/job/")) stopView = await jobView(view, path.slice(5));
    else if (path === "/quota") stopView = await quotaView(view, params);
    else if (path === "/datasets") stopView = await datasetsView(view, params);
    else if (path === "/submit") stopView = await submitView(view, params);
    else if (path === "/admin") stopView = await adminView(view, params);
    else stopView = await jobsView(view, params);
  } catch (e) {
    showError(e);
    view.replaceChildren(h("div", { class: "empty" }, e.message));
  }
}

$("logout").addEventListener("click", async () => {
  const id = localStorage.getItem("tessera.token-id");
  if (id) { try { await api("DELETE", `/tokens/${encodeURIComponent(id)}`); } catch (e) { /* already gone */ } }
  localStorage.removeItem("tessera.token-id");
  session.token = "";
  location.hash = "#/login";
});
window.addEventListener("hashchange", route);
route();
