// Browser test of the console's shards panel: real headless Chromium against a `tessera local`
// job with 3 pservers and 2 copies of every shard. The panel shows each shard with its primary
// and backup, all "ok" once copied; a pserver host killed with SIGKILL shows as failovers in the
// recent changes, and every shard is back to "ok" once its copies are restored. Saves a screenshot.
// Run by ctest (WebConsoleShowsReplicas) with TESSERA_BUILD_DIR and TESSERA_WEB_MODULES set.
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const { build, waitFor, uploadFashionMnist, openPage, startLocal, stopLocal, run } = require("./harness.cjs");

const screenshot = path.join(build, "console-replicas-screenshot.png");

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "web-replicas-"));
  uploadFashionMnist(path.join(dir, "store"));
  let context, local;
  try {
    let url;
    ({ local, url } = await startLocal(dir, ["--dataset", "fm", "--model", "mlp", "--model-arg", "hidden=32",
                                             "--pservers", "3", "--replicas", "2", "--trainers", "2", "--passes",
                                             "40", "--lease-ttl", "3", "--job", "rep"]));
    const opened = await openPage(dir);
    context = opened.context;
    const { page, errors } = opened;
    await page.goto(url);
    await waitFor("the job name on the page", 30, async () => (await page.textContent("#job-name")) === "rep");

    // Every shard with a primary and a backup, all copied.
    const states = async () => page.locator("#shards tbody tr").evaluateAll(
        (rows) => rows.map((r) => r.dataset.state));
    await waitFor("3 shards, all ok", 90, async () => {
      const s = await states();
      return s.length === 3 && s.every((x) => x === "ok");
    });
    if (!/host \d/.test(await page.textContent("#shards tbody tr:first-child td:nth-child(3)")))
      throw new Error("a shard without its backup: " + (await page.textContent("#shards")));

    // Host 1 killed: its shards fail over, and their copies are restored.
    const nodes = await (await fetch(new URL("/api/nodes", url))).json();
    const host = (nodes.replicas.hosts || []).find((h) => h.host === 1);
    if (!host || !host.info || !host.info.pid) throw new Error("no pid for host 1: " + JSON.stringify(nodes.replicas));
    process.kill(host.info.pid, "SIGKILL");
    await waitFor("failovers in the recent changes", 60, async () =>
      (await page.locator('#shard-changes tr[data-kind="failover"]').count()) > 0);
    const text = await page.textContent("#shard-changes");
    if (!/failover: host 1 gone, host \d primary/.test(text)) throw new Error("failover row: " + text);
    if (!/[1-9]\d* failovers?/.test(await page.textContent("#replicas-summary")))
      throw new Error("summary: " + (await page.textContent("#replicas-summary")));
    await waitFor("every shard ok again", 90, async () => {
      const s = await states();
      return s.length === 3 && s.every((x) => x === "ok");
    });

    await page.screenshot({ path: screenshot, fullPage: true });
    if (errors.length) throw new Error("the page reported errors:\n" + errors.join("\n"));
    console.log(`PASS: 3 shards x 2 copies shown; host 1 killed: failovers shown, then every shard ok; ` +
                `screenshot ${screenshot}`);
  } finally {
    if (context) await context.close().catch(() => {});
    if (local) await stopLocal(local);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

run(main);
