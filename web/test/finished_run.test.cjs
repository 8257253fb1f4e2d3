// Browser test of the console of a finished run: a short `tessera local` job runs to its end,
// then `tessera console --run DIR` serves it from the run directory, and real headless Chromium
// (driven by playwright-core) shows the trainers as finished (not lost), every pass's evaluation
// with each metric on its own axis, and a trainer's log, with no page errors. Saves a screenshot.
// Run by ctest (WebConsoleOfAFinishedRun) with TESSERA_BUILD_DIR and TESSERA_WEB_MODULES set.
"use strict";

const { spawn, execFileSync } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");
const { build, tessera, waitFor, uploadFashionMnist, openPage, run: runTest } = require("./harness.cjs");

const screenshot = path.join(build, "console-finished-screenshot.png");
const PASSES = 3;

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "web-finished-"));
  const store = path.join(dir, "store");
  const run = path.join(dir, "run");
  uploadFashionMnist(store);
  execFileSync(tessera, ["local", "--run", run, "--store", store, "--dataset", "fm", "--eval-dataset", "fm-test",
                         "--model", "mlp", "--model-arg", "hidden=16", "--trainers", "2", "--passes",
                         String(PASSES), "--lease-ttl", "3", "--job", "finished"], { stdio: "ignore", timeout: 240000 });
  let output = "";
  const server = spawn(tessera, ["console", "--run", run], { stdio: ["ignore", "pipe", "pipe"] });
  server.stdout.on("data", (d) => { output += d; });
  server.stderr.on("data", (d) => { output += d; });
  let context;
  try {
    const url = await waitFor("the console URL", 30, () => (output.match(/(http:\/\/\S+)/) || [])[1]);
    const opened = await openPage(dir);
    context = opened.context;
    const { page, errors } = opened;
    await page.goto(url);
    await waitFor("the job on the page", 30, async () => (await page.textContent("#job-name")) === "finished");
    await waitFor("the pass shown as finished", 10,
                  async () => /3 \/ 3 \(finished\)/.test((await page.textContent("#pass")) || ""));
    for (const t of ["trainer-0", "trainer-1"]) {
      await waitFor(`${t} shown as finished`, 10, async () =>
        (await page.getAttribute(`#nodes tr[data-node="${t}"]`, "data-state")) === "finished");
      const cls = await page.getAttribute(`#nodes tr[data-node="${t}"] td.state-finished`, "class");
      if (!cls) throw new Error(`${t}'s state cell is not styled as finished`);
    }
    // Every pass evaluated, accuracy and loss each on an axis of its own.
    await waitFor(`${PASSES} evaluated passes`, 10,
                  async () => Number(await page.getAttribute("#eval", "data-points")) === PASSES);
    const axes = Number(await page.getAttribute("#eval", "data-axes"));
    if (axes !== 2) throw new Error(`expected accuracy and loss on 2 axes, got ${axes}`);
    await page.selectOption("#log-node", "trainer-1");
    await waitFor("trainer-1's log lines", 30, async () =>
      /node=trainer-1/.test((await page.textContent("#log-lines")) || ""));
    await page.screenshot({ path: screenshot, fullPage: true });
    if (errors.length) throw new Error("the page reported errors:\n" + errors.join("\n"));
    console.log(`PASS: a finished run reopened: trainers finished, ${PASSES} passes evaluated on ${axes} axes; ` +
                `screenshot ${screenshot}`);
  } finally {
    if (context) await context.close().catch(() => {});
    server.kill("SIGINT");
    await waitFor("tessera console to stop", 30, () => server.exitCode !== null || server.signalCode !== null)
      .catch(() => server.kill("SIGKILL"));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

runTest(main);
