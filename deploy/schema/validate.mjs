// Validates Kubernetes manifests offline against the API schemas (npm kubernetes-models, pinned
// in package-lock.json): every document of every .yaml file under the given files or
// directories. A wrong type, a value outside an enum or a missing required field fails through
// the models' own validators. Those accept unknown fields (as the API server's non-strict mode
// does), so a misspelt field is caught here, strictly: every field is looked up in the models'
// type declarations (.d.ts), which list each object's fields. Errors name the file, the object
// and the path. Exit 0 when all are valid, 1 otherwise.
//   node validate.mjs DIR|FILE...
import { readFileSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { createRequire } from "node:module";
import { parseAllDocuments } from "yaml";

function filesOf(path) {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path).sort().flatMap((n) => filesOf(join(path, n))).filter((f) => f.endsWith(".yaml"));
}

// "apps/v1" + "StatefulSet" -> kubernetes-models/apps/v1/StatefulSet; core "v1" -> kubernetes-models/v1/...
async function modelOf(apiVersion, kind) {
  const path = `kubernetes-models/${apiVersion}/${kind}`;
  try {
    return (await import(path))[kind];
  } catch (e) {
    throw new Error(`no schema for ${apiVersion} ${kind} (${e.code || e.message})`);
  }
}

// ---- strict fields, from the .d.ts declarations ----
const require = createRequire(import.meta.url);
const modelsDir = dirname(require.resolve("kubernetes-models/package.json"));
const nodeModules = dirname(modelsDir);
const declarations = new Map();

// The fields of the first interface in a .d.ts file, and where its imported types live.
function declaration(path) {
  if (declarations.has(path)) return declarations.get(path);
  const text = readFileSync(path, "utf8");
  const imports = new Map();
  for (const m of text.matchAll(/^import \{ (\w+) \} from "([^"]+)";$/gm)) {
    let target = m[2].startsWith(".") ? join(dirname(path), m[2]) : join(nodeModules, m[2]);
    target = target.replace(/\.js$/, "") + ".d.ts";
    imports.set(m[1], target);
  }
  const body = text.match(/^export interface \w+( extends (\w+))? \{\n([\s\S]*?)^\}/m);
  let fields = null;
  if (body) {
    fields = new Map();
    for (const m of body[3].matchAll(/^ {4}"([^"]+)"\??: (.*?);?$/gm)) fields.set(m[1], m[2]);
    if (body[2] === "TypeMeta") ["apiVersion", "kind"].forEach((k) => fields.set(k, "string"));
  }
  const d = { fields, imports };
  declarations.set(path, d);
  return d;
}

function closest(word, names) {
  let best = "", bestCost = Infinity;
  for (const n of names) {
    const a = word.toLowerCase(), b = n.toLowerCase();
    const row = Array.from({ length: b.length + 1 }, (_, i) => i);
    for (let i = 1; i <= a.length; i++) {
      let prev = row[0];
      row[0] = i;
      for (let j = 1; j <= b.length; j++) {
        const t = row[j];
        row[j] = Math.min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
        prev = t;
      }
    }
    if (row[b.length] < bestCost) [best, bestCost] = [n, row[b.length]];
  }
  return bestCost <= Math.max(2, word.length / 3) ? best : "";
}

// Every field of `value` must be declared in the interface of `path`; nested objects likewise.
function strictFields(value, path, where, errors) {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return;
  const { fields, imports } = declaration(path);
  if (!fields) return;  // a type alias (IntOrString, Quantity, Time): no fields to check
  for (const [key, v] of Object.entries(value)) {
    const type = fields.get(key);
    if (type === undefined) {
      const guess = closest(key, [...fields.keys()]);
      errors.push(`${where}/${key}: unknown field${guess ? ` (did you mean '${guess}'?)` : ""}`);
      continue;
    }
    const m = type.match(/^(?:Array<)?(I\w+)>?$/);
    if (!m || !imports.has(m[1])) continue;
    const items = Array.isArray(v) ? v : [v];
    items.forEach((x, i) => strictFields(x, imports.get(m[1]), Array.isArray(v) ? `${where}/${key}/${i}` : `${where}/${key}`, errors));
  }
}

let failures = 0, objects = 0;
for (const file of process.argv.slice(2).flatMap(filesOf)) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  for (const doc of docs) {
    if (doc.errors.length) {
      console.error(`${file}: not valid YAML: ${doc.errors[0].message}`);
      failures++;
      continue;
    }
    const obj = doc.toJS();
    if (obj === null) continue;
    const name = `${obj.kind}/${obj.metadata?.name}`;
    try {
      const Model = await modelOf(obj.apiVersion, obj.kind);
      new Model(obj).validate();
      const errors = [];
      strictFields(obj, join(modelsDir, obj.apiVersion, `${obj.kind}.d.ts`), "", errors);
      if (errors.length) throw new Error(errors.join("; "));
      objects++;
    } catch (e) {
      failures++;
      console.error(`${file}: ${name}: ${e.message}`);
    }
  }
}
console.log(`${objects} objects valid, ${failures} invalid`);
process.exit(failures || objects === 0 ? 1 : 0);
