// Browser test of the web console: real headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core) against a running `tessera local` job. The page loads with no console errors,
// the cost chart gains points while training runs, a pserver killed with SIGKILL shows as lost
// and then restarted, the checkpoints panel shows verified checkpoints, and the logs panel shows a
// trainer's lines. Saves a screenshot.
// Run by ctest (WebConsoleInChromium) with TESSERA_BUILD_DIR and TESSERA_WEB_MODULES set.
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const { build, waitFor, uploadFashionMnist, openPage, startLocal, stopLocal, run } = require("./harness.cjs");

const screenshot = path.join(build, "console-screenshot.png");

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "web-test-"));
  uploadFashionMnist(path.join(dir, "store"));
  let context, local;
  try {
    let url;
    ({ local, url } = await startLocal(dir, ["--dataset", "fm", "--eval-dataset", "fm-test", "--model", "mlp",
                                             "--model-arg", "hidden=32", "--pservers", "2", "--trainers", "2",
                                             "--passes", "10", "--lease-ttl", "3", "--checkpoint-every", "1",
                                             "--job", "web"]));
    const opened = await openPage(dir);
    context = opened.context;
    const { page, errors } = opened;
    await page.goto(url);
    await waitFor("the job name on the page", 30, async () => (await page.textContent("#job-name")) === "web");

    // The cost chart gains points while training runs (and is drawn).
    const points = async () => Number(await page.getAttribute("#cost", "data-points"));
    const first = await waitFor("cost points", 60, async () => ((await points()) >= 3 ? await points() : 0));
    await waitFor("more cost points", 60, async () => (await points()) > first);
    await waitFor("the chart drawn", 10, async () => (await page.locator("#cost canvas").count()) > 0);

    // A pserver killed with SIGKILL shows as lost, then restarted.
    const nodes = await (await fetch(new URL("/api/nodes", url))).json();
    const ps1 = nodes.nodes.find((n) => n.node === "pserver-1");
    if (!ps1 || !ps1.info || !ps1.info.pid) throw new Error("no pid for pserver-1: " + JSON.stringify(nodes));
    process.kill(ps1.info.pid, "SIGKILL");
    const row = page.locator('#nodes tr[data-node="pserver-1"]');
    await waitFor("pserver-1 shown as lost and then restarted", 60, async () => {
      const history = (await row.getAttribute("data-history")) || "";
      return (await row.getAttribute("data-state")) === "restarted" && /lost.*restarted/.test(history);
    });

    // The checkpoints panel lists each pserver's checkpoints with their size and checked digest.
    await waitFor("a verified checkpoint of each pserver", 60, async () => {
      const text = (await page.textContent("#checkpoints")) || "";
      return /pserver-0/.test(text) && /pserver-1/.test(text) && /verified/.test(text) && /MiB/.test(text);
    });

    // The logs panel shows a trainer's lines.
    await page.selectOption("#log-node", "trainer-0");
    await waitFor("trainer-0's log lines", 30, async () =>
      /node=trainer-0/.test((await page.textContent("#log-lines")) || ""));

    await page.screenshot({ path: screenshot, fullPage: true });
    if (errors.length) throw new Error("the page reported errors:\n" + errors.join("\n"));
    console.log(`PASS: cost points ${first} -> ${await points()}, pserver-1 lost then restarted, ` +
                `trainer-0 log shown; screenshot ${screenshot}`);
  } finally {
    if (context) await context.close().catch(() => {});
    if (local) await stopLocal(local);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

run(main);
