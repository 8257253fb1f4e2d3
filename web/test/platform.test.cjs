// Browser test of the platform's pages: a real `tessera server` and real headless Chromium
// (playwright-core). Signs up and logs in through the page (an empty job list says so), writes a
// line into the starter script in the code editor and submits it, sees the job's cost chart gain
// points live and the script's line in a trainer's log, scales and stops it with the
// page's buttons; a viewer of the namespace sees no stop or scale button, and a forged token
// is refused; an upload cut off halfway resumes from the data sets page (progress to the end,
// then a preview, shared with another namespace); the administration page sets a quota and gives a role; a job over the quota
// waits and the list says why. Screenshots: <build>/platform-login.png, platform-datasets.png, platform-submit.png, platform-job.png, platform-admin.png, platform-viewer.png
// (copied into docs/).
// Run by ctest (PlatformPagesInChromium) with TESSERA_BUILD_DIR and TESSERA_WEB_MODULES set.
"use strict";

const { spawn } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");
const { build, tessera, waitFor, openPage, run: runTest } = require("./harness.cjs");

// Into the build tree (the ones in docs/ are copies of these).
const docs = build;
const PASSWORD = "correct horse";

async function call(base, method, p, token, body, raw) {
  const headers = {};
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (raw) Object.assign(headers, raw.headers);
  const res = await fetch(`${base}/api/v1${p}`, { method, headers, body: raw ? raw.body : body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : {} };
}

const FM = "/usr/share/datasets/fashion-mnist/";
const IMAGES = FM + "t10k-images-idx3-ubyte.gz", LABELS = FM + "t10k-labels-idx1-ubyte.gz";

// An upload of "fm" cut off after its first 4 MiB chunk (as a closed tab would leave it).
async function startUpload(base, token) {
  const crypto = require("crypto");
  const images = fs.readFileSync(IMAGES), labels = fs.readFileSync(LABELS);
  const up = await call(base, "POST", "/namespaces/ada/uploads", token,
                        { name: "fm", format: "idx", files: { images: { size: images.length }, labels: { size: labels.length } } });
  if (up.status !== 201) throw new Error(`upload: ${JSON.stringify(up.body)}`);
  const piece = images.subarray(0, 4 << 20);
  const r = await call(base, "PUT", `/uploads/${up.body.id}/files/images?offset=0`, token, undefined,
                       { body: piece, headers: { "Content-Type": "application/octet-stream",
                                                 "X-Chunk-SHA256": crypto.createHash("sha256").update(piece).digest("hex") } });
  if (r.status !== 200) throw new Error(`chunk: ${JSON.stringify(r.body)}`);
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "web-platform-"));
  let output = "";
  const server = spawn(tessera, ["server", "--data-dir", path.join(dir, "server"), "--port", "0", "--stop-jobs-on-exit"],
                       { stdio: ["ignore", "pipe", "pipe"] });
  server.stdout.on("data", (d) => { output += d; });
  server.stderr.on("data", (d) => { output += d; });
  let context;
  try {
    const base = await waitFor("the server", 30, () => (output.match(/web pages at (http:\/\/[^/\s]+)\//) || [])[1]);
    const opened = await openPage(dir);
    context = opened.context;
    const { page, errors } = opened;
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(base + "/");
    // Sign up and in through the page; the first job list is empty and says so.
    await page.waitForSelector("#login-name");
    await page.screenshot({ path: path.join(docs, "platform-login.png") });
    await page.fill("#login-name", "ada");
    await page.fill("#login-password", PASSWORD);
    await page.click("#signup-button");
    await waitFor("the empty job list", 30, async () => /No jobs in ada yet/.test((await page.textContent("#view")) || ""));
    const token = await page.evaluate(() => localStorage.getItem("tessera.token"));
    // The data set: an upload cut off halfway, resumed from the page with the same files; its preview.
    await startUpload(base, token);
    await page.click('a[data-nav="datasets"]');
    await page.waitForSelector("#upload-form");
    await page.fill("#upload-name", "fm");
    await page.selectOption("#upload-format", "idx");
    await page.setInputFiles("#upload-file-images", IMAGES);
    await page.setInputFiles("#upload-file-labels", LABELS);
    await page.click("#upload-button");
    await waitFor("the data set ready, the upload resumed where it was cut", 60, async () =>
      /data set fm is ready \(resumed at 4194304 bytes\)/.test((await page.textContent("#upload-status")) || ""));
    if (Number(await page.getAttribute("#upload-progress", "value")) !== 1) throw new Error("the progress bar did not reach the end");
    await page.click('tr[data-dataset="fm"] button');
    await waitFor("the preview", 30, async () => /"label_id":9/.test((await page.textContent("#preview-table")) || ""));
    // Shared read-only with vic's namespace.
    await call(base, "POST", "/signup", "", { name: "vic", password: PASSWORD });
    page.once("dialog", (d) => d.accept("vic"));
    await page.click('button[data-share="fm"]');
    await waitFor("fm shared with vic", 30, async () => /vic/.test((await page.textContent('tr[data-dataset="fm"]')) || ""));
    await page.screenshot({ path: path.join(docs, "platform-datasets.png") });
    // A job written in the page's editor (a line added to the starter script) and submitted.
    await page.click('a[data-nav="submit"]');
    await page.waitForSelector("#editor .cm-content");
    await page.click("#editor .cm-content");
    await page.keyboard.press("Control+Home");
    await page.keyboard.type('print("written in the browser", flush=True)\n');
    await page.fill("#submit-passes", "300");
    await page.fill("#submit-trainers-min", "1");
    await page.screenshot({ path: path.join(docs, "platform-submit.png") });
    await page.click("#submit-button");
    const id = await waitFor("the job's page", 30, async () => (page.url().match(/#\/job\/([a-z0-9-]+)$/) || [])[1]);
    await waitFor("the job running", 90, async () => (await page.textContent("#job-state")) === "running");
    const first = await waitFor("cost points", 60, async () => Number(await page.getAttribute("#cost", "data-points")) || 0);
    await waitFor("more cost points, live", 60, async () => Number(await page.getAttribute("#cost", "data-points")) > first);
    await waitFor("the edited script's line in trainer-0's log", 60, async () =>
      /written in the browser/.test((await page.textContent("#log")) || ""));
    await page.screenshot({ path: path.join(docs, "platform-job.png") });
    // Administration: a quota of one job for ada, and vic made a viewer of ada, through the page.
    await page.click('a[data-nav="admin"]');
    await page.waitForSelector("#quota-form");
    const rendered = async () => Number(await page.getAttribute("#view", "data-rendered"));
    const before = await rendered();
    await page.fill("#quota-jobs", "1");
    await page.click("#quota-save");
    await waitFor("the page shown again after saving", 30, async () => (await rendered()) > before);
    if ((await call(base, "GET", "/namespaces/ada/quota", token)).body.limits.jobs !== 1) throw new Error("the quota was not saved");
    await page.fill("#member-name", "vic");
    await page.selectOption("#member-role", "viewer");
    await page.click("#member-add");
    await waitFor("vic among the members", 30, async () => (await page.$('tr[data-member="vic"]')) !== null);
    if (!(await page.$('tr[data-user="vic"]'))) throw new Error("vic is not in the users' table");
    await page.screenshot({ path: path.join(docs, "platform-admin.png") });
    // Over the quota: a second job waits, and the list says why.
    const second = await call(base, "POST", "/namespaces/ada/jobs", token, { model: "mlp", dataset: "fm", passes: 1 });
    await page.click('a[data-nav="jobs"]');
    await waitFor("the waiting job's reason", 30, async () =>
      /over the quota of namespace 'ada'/.test((await page.textContent(`tr[data-job="${second.body.id}"]`)) || ""));
    // Filtered by who submitted: nobody else did.
    await page.fill("#filter-owner", "vic");
    await page.press("#filter-owner", "Enter");
    await waitFor("the owner filter", 30, async () => /No\s+jobs in ada submitted by vic/.test((await page.textContent("#view")) || ""));
    await page.goto(`${base}/#/job/${id}`);
    await waitFor("the job's page again", 30, async () => (await page.textContent("#job-state")) === "running");
    // Scale to one trainer, then stop, with the page's buttons.
    await page.fill("#scale-n", "1");
    await page.click("#scale-button");
    await waitFor("one trainer", 60, async () => (await call(base, "GET", `/jobs/${id}`, token)).body.trainers === 1);
    await page.click("#stop-button");
    await waitFor("the job stopped", 90, async () => (await page.textContent("#job-state")) === "stopped");
    // A viewer of ada's namespace: the job's page has no stop or scale button.
    await page.click("#logout");
    // vic logs in with the keyboard alone: the name field has the focus, Tab, Enter.
    await page.waitForSelector("#login-name");
    await waitFor("the focus in the name field", 10, async () => page.evaluate(() => document.activeElement.id === "login-name"));
    await page.keyboard.type("vic");
    await page.keyboard.press("Tab");
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press("Enter");
    await waitFor("vic's job list", 30, async () => (await page.$("#filter-ns")) !== null);
    await page.goto(`${base}/#/job/${id}`);
    await waitFor("the job's page for vic", 30, async () => (await page.textContent("#job-state")) === "stopped");
    await waitFor("the cost history for vic", 30, async () => Number(await page.getAttribute("#cost", "data-points")) > 0);
    if (await page.$("#stop-button")) throw new Error("a viewer sees the stop button");
    if (await page.$("#scale-button")) throw new Error("a viewer sees the scale button");
    await page.screenshot({ path: path.join(docs, "platform-viewer.png") });
    // Nor a submit button: the page says what the role allows.
    await page.goto(`${base}/#/submit?ns=ada`);
    await waitFor("the viewer's submit page", 30, async () => /Your role in ada lets you watch its jobs, not submit them/.test((await page.textContent("#view")) || ""));
    if (await page.$("#submit-button")) throw new Error("a viewer sees the submit button");
    // A forged request from the page is refused.
    const forged = await page.evaluate(async (jobId) => {
      const r = await fetch(`/api/v1/jobs/${jobId}/stop`, { method: "POST", headers: { Authorization: "Bearer forged" } });
      return r.status;
    }, id);
    if (forged !== 401) throw new Error(`a forged token got ${forged}`);
    // The forged request's own 401, as the page and the browser's console report it.
    const expected = (e) => /HTTP 401 for .*\/stop$/.test(e) || /status of 401 \(Unauthorized\)/.test(e);
    const unexpected = errors.filter((e) => !expected(e));
    if (unexpected.length) throw new Error("the page reported errors:\n" + unexpected.join("\n"));
    console.log(`PASS: signed up, job ${id} watched live (${first}+ cost points), scaled, stopped; a viewer has no buttons`);
  } finally {
    if (context) await context.close().catch(() => {});
    server.kill("SIGTERM");
    await waitFor("tessera server to stop", 60, () => server.exitCode !== null || server.signalCode !== null)
      .catch(() => server.kill("SIGKILL"));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

runTest(main);
