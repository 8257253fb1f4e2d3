#!/usr/bin/env bash
# Installs the Debian packages Tessera needs:
#   install-deps.sh demo   what building the `tessera` command and running the demo need (`make demo`)
#   install-deps.sh        everything: that, and what the tests, benchmarks, Python module and web
#                          console need (`make test`, `make deps`)
# Idempotent: packages already installed are skipped; apt-get runs only when something is missing.
# As another user it asks sudo only when something is missing. Nothing is downloaded from
# outside Debian's archive here; the web console's npm packages come from the npm registry (the
# build installs them).
set -euo pipefail

case "${1:-all}" in
  demo | all) WHAT=${1:-all} ;;
  *)
    echo "usage: install-deps.sh [demo|all]" >&2
    exit 2
    ;;
esac

# The `tessera` command (every library it links) and the demo's data. No ccache: a first build
# has nothing cached, and ccache only adds work to it (each file preprocessed once more).
DEMO_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc etcd-server
  libeigen3-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev libcpp-httplib-dev
  libssl-dev libzstd-dev zlib1g-dev libyaml-cpp-dev libabsl-dev
  libsqlite3-dev libsqlitecpp-dev libpqxx-dev libsodium-dev libarchive-dev
  dataset-fashion-mnist
)

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git openssl
  # clang: only for the thread-safety analysis (ThreadSafetyTest); the build itself uses GCC
  clang
  # RPC and coordination
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc etcd-server etcd-client
  # libraries
  libeigen3-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev libcpp-httplib-dev
  libssl-dev libzstd-dev zlib1g-dev libasio-dev libyaml-cpp-dev
  # sparse tables: abseil's open-addressing hash map
  libabsl-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev googletest libbenchmark-dev iperf3 iproute2 procps curl
  # the CTR quality benchmark's batch reference (liblinear-train)
  liblinear-tools
  # Python module and the PyTorch example (torch uses whichever libblas.so.3 is selected:
  # OpenBLAS makes it about 20x faster than the reference BLAS)
  python3 python3-dev pybind11-dev python3-numpy python3-torch libopenblas0-pthread
  # beyond one machine: MPI and ssh launch (tests run real mpirun and sshd)
  openmpi-bin openssh-server openssh-client
  # the platform server: SQLite and PostgreSQL (tests start a real one), password hashing; each
  # job's sandbox (bubblewrap; setpriv is util-linux's)
  libsqlite3-dev libsqlitecpp-dev libpqxx-dev postgresql libsodium-dev libarchive-dev bubblewrap util-linux
  # notebooks: the example notebook is executed by a test (a real Jupyter kernel) and plots
  python3-nbclient python3-nbformat python3-ipykernel python3-matplotlib
  # real data sets
  dataset-fashion-mnist bible-kjv
  # web console build and browser tests
  chromium
)

if [ "$WHAT" = demo ]; then PACKAGES=("${DEMO_PACKAGES[@]}"); else PACKAGES+=("${DEMO_PACKAGES[@]}"); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# Node.js and npm (not for the demo): any installed node (Debian's or another apt source) will do.
if [ "$WHAT" = all ] && ! command -v node >/dev/null 2>&1; then missing+=(nodejs); fi
if [ "$WHAT" = all ] && ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: every package ($WHAT) is already installed"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}" >&2
  if command -v sudo >/dev/null 2>&1; then
    echo "install-deps: installing them with sudo" >&2
    exec sudo "$0" "$WHAT"
  fi
  echo "install-deps: run as root ($0 $WHAT) to install them" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q || echo "install-deps: apt-get update failed; trying the cached package lists" >&2
apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: done"
