// Shared by the browser tests: the build's tessera, polling with a deadline, the Fashion-MNIST
// uploads, and a headless Chromium page that records every error it sees.
"use strict";

const { execFileSync, spawn } = require("child_process");
const path = require("path");

const build = process.env.TESSERA_BUILD_DIR;
const modules = process.env.TESSERA_WEB_MODULES;
if (!build || !modules) {
  console.error("set TESSERA_BUILD_DIR and TESSERA_WEB_MODULES (ctest does)");
  process.exit(2);
}
const { chromium } = require(path.join(modules, "playwright-core"));
const tessera = path.join(build, "src", "tessera");

// Polls `fn` until it returns a truthy value or `seconds` pass; throws `what` on timeout.
async function waitFor(what, seconds, fn) {
  const deadline = Date.now() + seconds * 1000;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e.message;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out after ${seconds} s waiting for ${what} (last: ${JSON.stringify(last)})`);
}

// Fashion-MNIST's training and test sets as the data sets "fm" and "fm-test" of `store`.
function uploadFashionMnist(store) {
  const fm = "/usr/share/datasets/fashion-mnist/";
  for (const [name, images, labels] of [["fm", "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"],
                                        ["fm-test", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]]) {
    execFileSync(tessera, ["upload", "--store", store, "--dataset", name, "--format", "idx", "--images",
                           fm + images, "--labels", fm + labels], { stdio: "ignore" });
  }
}

// Debian's Chromium, headless, with a fresh profile in `dir`; `errors` collects console errors,
// page errors, failed requests and HTTP errors.
async function openPage(dir) {
  const context = await chromium.launchPersistentContext(path.join(dir, "chromium-profile"), {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync"],
    viewport: { width: 1400, height: 1300 },
  });
  const page = context.pages()[0] || (await context.newPage());
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(`console: ${m.text()}`); });
  page.on("pageerror", (e) => errors.push(`page: ${e.message}`));
  page.on("requestfailed", (r) => errors.push(`request failed: ${r.url()}`));
  page.on("response", (r) => { if (r.status() >= 400) errors.push(`HTTP ${r.status()} for ${r.url()}`); });
  return { context, page, errors };
}

// `tessera local --run DIR/run --store DIR/store ARGS...` started; resolves once it printed its
// web console's URL, with the process, that URL and a function giving its output so far.
async function startLocal(dir, args) {
  let output = "";
  const local = spawn(tessera, ["local", "--run", path.join(dir, "run"), "--store", path.join(dir, "store"), ...args],
                      { stdio: ["ignore", "pipe", "pipe"] });
  local.stdout.on("data", (d) => { output += d; });
  local.stderr.on("data", (d) => { output += d; });
  try {
    const url = await waitFor("the console URL from tessera local", 60,
                              () => (output.match(/web console: (http:\/\/\S+)/) || [])[1]);
    return { local, url, output: () => output };
  } catch (e) {
    await stopLocal(local);
    throw new Error(`${e.message}; tessera local said:\n${output}`);
  }
}

// Ctrl-C to a `tessera local`, SIGKILL if it has not stopped within a minute.
async function stopLocal(local) {
  local.kill("SIGINT");
  await waitFor("tessera local to stop", 60, () => local.exitCode !== null || local.signalCode !== null)
    .catch(() => local.kill("SIGKILL"));
}

// Runs main(), printing FAIL and exiting 1 on an error.
function run(main) {
  main().catch((e) => {
    console.error("FAIL:", e.message);
    process.exit(1);
  });
}

module.exports = { build, tessera, waitFor, uploadFashionMnist, openPage, startLocal, stopLocal, run };
