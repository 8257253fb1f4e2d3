// Copies the code editor's ES modules (CodeMirror 6 and what it imports, installed by `npm ci`)
// into the platform's pages and writes their import map into index.html, so the browser loads
// them as they are: no bundler. Run by the build (web/CMakeLists.txt):
//   node vendor.cjs NODE_MODULES TEMPLATE_HTML OUT_DIR
"use strict";

const fs = require("fs");
const path = require("path");

const [modules, template, out] = process.argv.slice(2);
if (!out) {
  console.error("usage: vendor.cjs NODE_MODULES TEMPLATE_HTML OUT_DIR");
  process.exit(2);
}

// The ES module entry of a package (its "exports" import, else "module", else "main").
function entry(pkg) {
  const j = JSON.parse(fs.readFileSync(path.join(modules, pkg, "package.json"), "utf8"));
  const e = j.exports;
  let m = e && (typeof e === "string" ? e : e["."] && (typeof e["."] === "string" ? e["."] : e["."].import || e["."].default) || e.import);
  if (m && typeof m === "object") m = m.default;
  return (m || j.module || j.main || "index.js").replace(/^\.\//, "");
}

// The packages reachable from the editor's two, through their dependencies.
const seen = new Set();
function visit(pkg) {
  if (seen.has(pkg)) return;
  seen.add(pkg);
  const j = JSON.parse(fs.readFileSync(path.join(modules, pkg, "package.json"), "utf8"));
  for (const d of Object.keys(j.dependencies || {})) visit(d);
}
visit("codemirror");
visit("@codemirror/lang-python");

const imports = {};
for (const pkg of [...seen].sort()) {
  const from = path.join(modules, pkg);
  const to = path.join(out, "cm", pkg);
  fs.mkdirSync(to, { recursive: true });
  fs.cpSync(from, to, { recursive: true, filter: (src) => fs.statSync(src).isDirectory() || /\.(js|json)$/.test(src) });
  imports[pkg] = `/cm/${pkg}/${entry(pkg)}`;
}
const html = fs.readFileSync(template, "utf8")
  .replace("<!-- importmap -->", `<script type="importmap">${JSON.stringify({ imports })}</script>`);
fs.writeFileSync(path.join(out, "index.html"), html);
console.log(`vendored ${seen.size} packages for the editor`);
