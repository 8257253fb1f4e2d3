// Browser test of a sparse table's counts in the console's nodes panel: real headless Chromium
// against `tessera local` training logreg with a 1 MiB budget for its weights table, on a click
// log with far more feature ids than that holds. The pserver's row shows the table's rows, bytes,
// admitted and evicted counts, and the evicted count grows as training goes on.
// Run by ctest (WebConsoleShowsTableLimits) with TESSERA_BUILD_DIR and TESSERA_WEB_MODULES set.
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const { execFileSync } = require("child_process");
const { tessera, waitFor, openPage, startLocal, stopLocal, run } = require("./harness.cjs");

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "web-tables-"));
  let context, local;
  try {
    execFileSync(tessera, ["gen-ctr", "--train-out", path.join(dir, "train.svm"), "--eval-out",
                           path.join(dir, "eval.svm"), "--rows", "100000", "--features", "2000000"],
                 { stdio: "ignore" });
    execFileSync(tessera, ["upload", "--store", path.join(dir, "store"), "--dataset", "ctr", "--format", "libsvm",
                           "--input", path.join(dir, "train.svm")], { stdio: "ignore" });
    let url;
    ({ local, url } = await startLocal(dir, ["--dataset", "ctr", "--model", "logreg", "--model-arg", "budget_mib=1",
                                             "--passes", "50", "--optimizer", "ftrl:alpha=0.1,beta=0.01",
                                             "--lease-ttl", "3", "--job", "tables"]));
    const opened = await openPage(dir);
    context = opened.context;
    const { page, errors } = opened;
    await page.goto(url);
    await waitFor("the job name on the page", 30, async () => (await page.textContent("#job-name")) === "tables");

    // data-tables: "name:rows:admitted:evicted" per sparse table.
    const counts = async () => {
      const t = (await page.locator('#nodes tbody tr[data-node="pserver-0"]').evaluateAll(
          (rows) => rows.map((r) => r.dataset.tables)))[0];
      const m = /^weights:(\d+):(\d+):(\d+)$/.exec(t || "");
      return m ? { rows: +m[1], admitted: +m[2], evicted: +m[3] } : null;
    };
    const first = await waitFor("evicted rows of table weights on pserver-0", 90, async () => {
      const c = await counts();
      return c && c.evicted > 0 ? c : null;
    });
    if (first.admitted - first.evicted !== first.rows) throw new Error("counts do not add up: " + JSON.stringify(first));
    const text = await page.textContent('#nodes tbody tr[data-node="pserver-0"]');
    if (!/table weights: \d+ rows, [0-9.]+ MiB \(\d+ admitted, \d+ evicted\)/.test(text))
      throw new Error("the pserver's row does not show the table: " + text);
    const later = await waitFor("more evictions as training goes on", 60, async () => {
      const c = await counts();
      return c && c.evicted > first.evicted ? c : null;
    });
    if (errors.length) throw new Error("the page reported errors:\n" + errors.join("\n"));
    console.log(`PASS: table weights on pserver-0: ${first.rows} rows, ${first.admitted} admitted, ` +
                `${first.evicted} evicted, then ${later.evicted} evicted`);
  } finally {
    if (context) await context.close().catch(() => {});
    if (local) await stopLocal(local);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

run(main);
