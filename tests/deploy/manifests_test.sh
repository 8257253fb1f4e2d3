#!/usr/bin/env bash
# The manifests `tessera deploy k8s` renders, proven without a cluster:
#  1. every example spec (deploy/examples) renders, and every object passes the Kubernetes API
#     schemas offline (deploy/schema/validate.mjs: types, enums, required and unknown fields);
#  2. the validator itself catches a misspelt field and a wrong type planted in a manifest;
#  3. each rendering equals its golden file (tests/deploy/golden/<spec>.yaml), so a reviewer sees
#     every change to the YAML. TESSERA_UPDATE_GOLDEN=1 rewrites them after a deliberate change;
#  4. a spec with a mistake, or an --out directory holding someone else's files, is refused and
#     nothing is written.
set -euo pipefail
build=${TESSERA_BUILD_DIR:?} src=${TESSERA_SOURCE_DIR:?} schema=${TESSERA_SCHEMA_DIR:?}
tessera=$build/src/tessera
tmp=$(mktemp -d /tmp/tessera-manifests-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Every file of a rendering, in order, as one multi-document YAML.
concat() { (cd "$1" && find . -name '*.yaml' | sort | while read -r f; do echo "--- # ${f#./}"; cat "$f"; done); }

for spec in "$src"/deploy/examples/*.yaml; do
  name=$(basename "$spec" .yaml)
  out=$tmp/$name
  "$tessera" deploy k8s --spec "$spec" --out "$out" > "$tmp/$name.log" || { cat "$tmp/$name.log"; fail "$name did not render"; }
  node "$schema/validate.mjs" "$out" || fail "$name: the manifests do not pass the Kubernetes schemas"
  golden=$src/tests/deploy/golden/$name.yaml
  if [ "${TESSERA_UPDATE_GOLDEN:-}" = 1 ]; then
    concat "$out" > "$golden"
    echo "updated $golden"
  fi
  diff -u "$golden" <(concat "$out") || fail "$name: the rendering differs from $golden (TESSERA_UPDATE_GOLDEN=1 after a deliberate change)"
  # Rendering again into the same directory is allowed and gives the same files.
  "$tessera" deploy k8s --spec "$spec" --out "$out" > /dev/null || fail "$name: a second rendering into $out was refused"
  diff -u "$golden" <(concat "$out") > /dev/null || fail "$name: a second rendering differs"
done

# An elastic job: its pserver StatefulSet starts small, is scaled later (the deploy says how),
# and gives a pod that goes the time to hand its shards over.
sed 's/^pservers: \(.*\)$/pservers: \1\nstart_pservers: 1/' "$src/deploy/examples/fashion-mnist.yaml" > "$tmp/elastic.yaml"
grep -q '^start_pservers: 1' "$tmp/elastic.yaml" || fail "could not make the elastic spec"
"$tessera" deploy k8s --spec "$tmp/elastic.yaml" --out "$tmp/elastic" > "$tmp/elastic.log" || { cat "$tmp/elastic.log"; fail "the elastic job did not render"; }
node "$schema/validate.mjs" "$tmp/elastic" || fail "elastic: the manifests do not pass the Kubernetes schemas"
set_file=$tmp/elastic/31-pserver-statefulset.yaml
grep -q '^  replicas: 1$' "$set_file" || fail "the elastic StatefulSet does not start with 1 pserver: $(cat "$set_file")"
grep -q 'terminationGracePeriodSeconds: 90' "$set_file" || fail "the elastic pservers get no time to hand over"
grep -q 'tessera.io/max-pservers' "$set_file" || fail "the elastic StatefulSet does not say its bound"
grep -rq -- '--start-pservers' "$tmp/elastic" || fail "job create is not told the job is elastic"
grep -q 'scale statefulset fashion-pserver' "$tmp/elastic.log" || fail "the deploy does not say how to scale: $(cat "$tmp/elastic.log")"

# The validator is not a rubber stamp.
one=$tmp/fashion-mnist/31-pserver-statefulset.yaml
sed 's/serviceName:/servicName:/' "$one" > "$tmp/typo.yaml"
if out=$(node "$schema/validate.mjs" "$tmp/typo.yaml" 2>&1); then fail "a misspelt field passed: $out"; fi
grep -q "did you mean 'serviceName'" <<< "$out" || fail "the misspelt field was not named: $out"
sed 's/replicas: 2/replicas: "2"/' "$one" > "$tmp/type.yaml"
if out=$(node "$schema/validate.mjs" "$tmp/type.yaml" 2>&1); then fail "a string for replicas passed: $out"; fi

# Mistakes are refused, naming them, and write nothing.
printf 'name: fm\npservers: 2\ntrain: {dataset: fm, model: mlp, passes: 3, checkpoint_every: 0}\nstore: {path: /s, claim: c}\nmaster: 1\n' > "$tmp/bad.yaml"
if out=$("$tessera" deploy k8s --spec "$tmp/bad.yaml" --out "$tmp/bad" 2>&1); then fail "a misspelt spec field was accepted"; fi
grep -q "master: unknown field (did you mean 'masters'?)" <<< "$out" || fail "unexpected message: $out"
[ ! -e "$tmp/bad" ] || fail "a refused spec wrote $tmp/bad"
mkdir -p "$tmp/mine" && echo keep > "$tmp/mine/notes.txt"
if out=$("$tessera" deploy k8s --spec "$src/deploy/examples/fashion-mnist.yaml" --out "$tmp/mine" 2>&1); then
  fail "an --out directory holding other files was written into"
fi
grep -q "notes.txt" <<< "$out" || fail "unexpected message: $out"
[ "$(ls "$tmp/mine")" = notes.txt ] || fail "files were written beside notes.txt"
echo "manifests: every example valid and as reviewed; mistakes refused"
