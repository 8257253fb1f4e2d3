#!/usr/bin/env bash
# InstallTest: `cmake --install` into a temporary prefix, then, from outside the source tree and
# with a clean environment (PATH: the prefix's bin and the system's; no PYTHONPATH, no
# LD_LIBRARY_PATH), what a user of the installed package does: the command and its manual page,
# a job with a built-in model, the Python module (the PyTorch example as installed), and the C
# example compiled against the installed header and library. Fails naming the step.
set -euo pipefail
B=${TESSERA_BUILD_DIR:?} S=${TESSERA_SOURCE_DIR:?}
T=$(mktemp -d /tmp/tessera-install-XXXXXX)
trap 'rm -rf "$T"' EXIT
P=$T/prefix
FM=/usr/share/datasets/fashion-mnist
fail() { echo "InstallTest: $*" >&2; exit 1; }
# A clean environment; every run bounded in time (tessera local stops its own children).
run() { env -i PATH="$P/bin:/usr/bin:/bin" HOME="$T/home" LANG=C.UTF-8 timeout -k 10 "$@"; }
accuracy() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics"]["accuracy"])' "$1"; }

cmake --install "$B" --prefix "$P" > "$T/install.log" || fail "cmake --install: $(tail -5 "$T/install.log")"
mkdir -p "$T/home" "$T/work"
cd "$T/work"

# 1. The command (not the build tree's), its version and its manual page.
[ "$(run 10 sh -c 'command -v tessera')" = "$P/bin/tessera" ] || fail "tessera is not on PATH from the prefix"
run 10 tessera --version | grep -q '^tessera [0-9]' || fail "tessera --version"
grep -q '^\.SH "TESSERA LOCAL"' "$P/share/man/man1/tessera.1" || fail "the manual page has no section for tessera local"
[ -f "$P/share/tessera/web/index.html" ] && [ -f "$P/share/tessera/platform/index.html" ] || fail "web pages not installed"

# 2. A job with a built-in model (Fashion-MNIST's test images as a small training set).
run 120 tessera upload --store store --dataset fm --format idx --images "$FM/t10k-images-idx3-ubyte.gz" \
  --labels "$FM/t10k-labels-idx1-ubyte.gz" > upload.log 2>&1 || fail "upload: $(tail -5 upload.log)"
run 300 tessera local --run mlp --store store --dataset fm --eval-dataset fm --model mlp --pservers 1 --trainers 1 \
  --passes 2 > mlp.log 2>&1 || fail "tessera local (mlp): $(tail -20 mlp.log)"
a=$(accuracy mlp/result.json)
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$a') > 0.6 else 1)" || fail "the mlp's accuracy is $a"

# 3. The Python module, found by the installed tessera local beside its binary: the PyTorch
# example as installed, its small MLP, one pass.
EX=$P/share/doc/tessera/examples
run 400 tessera local --run py --store store --dataset fm --eval-dataset fm --pservers 1 --trainers 1 --passes 1 \
  --optimizer adam:lr=0.002 --trainer-cmd "/usr/bin/python3 $EX/fashion_mnist/train.py --mlp" > py.log 2>&1 ||
  fail "tessera local (the PyTorch example): $(tail -20 py.log)"
a=$(accuracy py/result.json)
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$a') > 0.6 else 1)" || fail "the PyTorch example's accuracy is $a"
# and by a script of the user's own, with the prefix's module on PYTHONPATH.
run 60 env PYTHONPATH="$P/lib/tessera/python" /usr/bin/python3 -c 'import tessera; print(tessera.Error)' > import.log 2>&1 ||
  fail "import tessera: $(tail -5 import.log)"

# 4. The C example, compiled against the installed header and library.
lib=$(dirname "$(find "$P" -name 'libtessera_c.so' | head -1)")
[ -n "$lib" ] || fail "libtessera_c.so is not installed"
cc -O2 -o linreg "$EX/c/linreg.c" -I"$P/include" -L"$lib" -ltessera_c -Wl,-rpath,"$lib" ||
  fail "the C example does not compile against the installed header and library"
/usr/bin/python3 - > lin.csv <<'PY'
import random
random.seed(7)
w = [0.5, -1.0, 2.0, 0.25]
for _ in range(4000):
    x = [random.uniform(-1, 1) for _ in w]
    print(",".join(f"{v:.5f}" for v in x) + f",{sum(a * b for a, b in zip(w, x)) + 0.3:.5f}")
PY
run 60 tessera upload --store store --dataset lin --format text --input lin.csv > upload-lin.log 2>&1 ||
  fail "upload (csv): $(tail -5 upload-lin.log)"
run 300 tessera local --run c --store store --dataset lin --pservers 1 --trainers 1 --passes 4 --batch-size 32 \
  --optimizer sgd:lr=0.2 --trainer-cmd "$T/work/linreg" > c.log 2>&1 || fail "tessera local (the C example): $(tail -20 c.log)"
line=$(grep -rh "linreg_c: trainer" c/logs | head -1)
[ -n "$line" ] || fail "the C example did not run to its end: $(tail -20 c.log)"
mse=$(echo "$line" | sed -n 's/.*last batch mse \([0-9.]*\).*/\1/p')
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$mse') < 0.05 else 1)" || fail "the C example's mse is $mse: $line"
echo "InstallTest: the installed command, manual page, built-in job, Python module and C example all work"
