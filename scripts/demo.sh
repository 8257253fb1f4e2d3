#!/usr/bin/env bash
# The main job: train a small neural network (the built-in `mlp`) on Fashion-MNIST (Debian's
# dataset-fashion-mnist) with a local Tessera cluster of 2 pservers and 2 trainers in sync mode,
# then print the test accuracy and where the model was saved. Run by `make demo` after the build.
set -euo pipefail
cd "$(dirname "$0")/.."
T=build/src/tessera
DATA=/usr/share/datasets/fashion-mnist
STORE=demo-run/store
RUN=demo-run/run-$(date +%Y%m%d-%H%M%S)

echo "== Tessera demo: Fashion-MNIST on a local cluster (2 pservers, 2 trainers, sync) =="
if [ ! -f "$STORE/fmnist-train/manifest.json" ]; then
  "$T" upload --store "$STORE" --dataset fmnist-train --format idx \
    --images "$DATA/train-images-idx3-ubyte.gz" --labels "$DATA/train-labels-idx1-ubyte.gz"
fi
if [ ! -f "$STORE/fmnist-test/manifest.json" ]; then
  "$T" upload --store "$STORE" --dataset fmnist-test --format idx \
    --images "$DATA/t10k-images-idx3-ubyte.gz" --labels "$DATA/t10k-labels-idx1-ubyte.gz"
fi
"$T" local --run "$RUN" --job fmnist --store "$STORE" --dataset fmnist-train --eval-dataset fmnist-test \
  --model mlp --model-arg hidden=256 --batch-size 64 --optimizer adam:lr=0.001 \
  --pservers 2 --trainers 2 --mode sync --passes 5
echo "== done: the numbers above are the test-set accuracy and loss after the last pass =="
