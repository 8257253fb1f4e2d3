#!/usr/bin/env bash
# CTR quality: the built-in logreg trained with FTRL under `tessera local` beside a tuned batch
# L2-regularized logistic regression (Debian's liblinear, -s 0, C swept) on the same
# `tessera gen-ctr` rows, and the Bayes AUC (the true probabilities) of the evaluation rows.
# Prints a Markdown table. Usage: bench/ctr_quality.sh BUILD_DIR [ROWS]
set -euo pipefail

build=${1:?usage: ctr_quality.sh BUILD_DIR [ROWS]}
rows=${2:-200000}
tessera=$(cd "$build" && pwd)/src/tessera
ftrl=${FTRL:-ftrl:alpha=0.1,beta=0.01,l1=0.0003}
passes=${PASSES:-4}
for tool in liblinear-train liblinear-predict; do
  command -v $tool >/dev/null || { echo "ctr_quality: $tool missing (apt-get install liblinear-tools)" >&2; exit 1; }
done

dir=$(mktemp -d /tmp/tessera-ctr-quality.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir"

bayes=$("$tessera" gen-ctr --train-out train.svm --eval-out eval.svm --rows "$rows" | sed -n 's/.*evaluation rows: \([0-9.]*\).*/\1/p')

# AUC of scores (one per line, or liblinear's "labels 1 -1" table) against the eval labels.
auc() {
  /usr/bin/python3 - "$1" eval.svm <<'EOF'
import sys
lines = [l.split() for l in open(sys.argv[1]) if l.strip()]
if lines[0][0] == "labels":
    col = 1 + lines[0][1:].index("1")
    scores = [float(l[col]) for l in lines[1:]]
else:
    scores = [float(l[0]) for l in lines]
labels = [1 if float(l.split()[0]) > 0 else 0 for l in open(sys.argv[2]) if l.strip()]
order = sorted(range(len(scores)), key=lambda i: scores[i])
rank, i = [0.0] * len(scores), 0
while i < len(order):  # tied scores share their mean rank
    j = i
    while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
        j += 1
    for k in range(i, j + 1):
        rank[order[k]] = (i + j) / 2 + 1
    i = j + 1
pos = sum(labels)
neg = len(labels) - pos
print("%.4f" % ((sum(r for r, y in zip(rank, labels) if y) - pos * (pos + 1) / 2) / (pos * neg)))
EOF
}

# liblinear wants 1-based feature indices and +1/-1 labels.
for f in train eval; do
  awk '{printf "%s", ($1 > 0 ? "+1" : "-1"); for (i = 2; i <= NF; i++) { split($i, a, ":"); printf " %d:%s", a[1] + 1, a[2] } print ""}' \
    $f.svm >$f.ll
done
best_c="" best_auc=0 best_s=0
for c in 0.03 0.1 0.2 0.25 0.3 0.5 1; do
  start=$(date +%s.%N)
  liblinear-train -q -s 0 -B 1 -c $c train.ll model.ll >/dev/null
  end=$(date +%s.%N)
  liblinear-predict -b 1 eval.ll model.ll pred.ll >/dev/null
  a=$(auc pred.ll)
  if awk "BEGIN{exit !($a > $best_auc)}"; then best_c=$c best_auc=$a best_s=$(awk "BEGIN{print $end - $start}"); fi
done

mkdir store
"$tessera" upload --store store --dataset ctr --format libsvm --input train.svm >/dev/null 2>&1
"$tessera" upload --store store --dataset ctr-eval --format libsvm --input eval.svm >/dev/null 2>&1
start=$(date +%s.%N)
"$tessera" local --store store --dataset ctr --eval-dataset ctr-eval --model logreg --optimizer "$ftrl" \
  --passes "$passes" --run run >/dev/null 2>&1
end=$(date +%s.%N)
ftrl_auc=$(/usr/bin/python3 -c 'import json,sys; print("%.4f" % json.load(open(sys.argv[1]))["metrics"]["auc"])' run/result.json)

echo "CTR quality: tessera gen-ctr, $rows training rows, 20000 evaluation rows"
echo
echo "| model | AUC | time |"
echo "|---|---|---|"
printf "| Bayes (true probabilities) | %s | |\n" "$bayes"
printf "| liblinear L2 logistic regression, C=%s (best of 7) | %s | %.1f s |\n" "$best_c" "$best_auc" "$best_s"
printf "| tessera local logreg, %s, %s passes | %s | %.1f s |\n" "$ftrl" "$passes" "$ftrl_auc" \
  "$(awk "BEGIN{print $end - $start}")"
printf "\nFTRL - batch reference: %+.4f AUC\n" "$(awk "BEGIN{print $ftrl_auc - $best_auc}")"
