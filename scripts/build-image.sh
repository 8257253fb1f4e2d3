#!/usr/bin/env bash
# `make image`: builds deploy/Dockerfile into tessera:<version> where a container engine and
# the debian:12 base image are at hand. Nothing is pulled: the base image must already be in
# the engine's store (pulling it is a download from outside Debian's and npm's registries).
# Says exactly which of these is missing otherwise, and exits 2.
set -euo pipefail
cd "$(dirname "$0")/.."
tag="tessera:$(git describe --tags --always 2>/dev/null || echo latest)"

engine=""
for e in docker podman; do
  if command -v "$e" >/dev/null 2>&1; then engine="$e"; break; fi
done
if [ -z "$engine" ]; then
  echo "make image: no container engine: neither docker nor podman is on PATH" >&2
  exit 2
fi
if ! "$engine" info >/dev/null 2>&1; then
  echo "make image: $engine is installed but its daemon does not answer ($engine info failed:" \
       "$("$engine" info 2>&1 | tail -1))" >&2
  exit 2
fi
if ! "$engine" image inspect debian:12 >/dev/null 2>&1; then
  echo "make image: the base image debian:12 is not in $engine's store; load it first" \
       "(e.g. $engine pull debian:12 where that registry is reachable)" >&2
  exit 2
fi
echo "building $tag with $engine from deploy/Dockerfile"
"$engine" build --pull=false -f deploy/Dockerfile -t "$tag" .
"$engine" run --rm "$tag" tessera --help >/dev/null
echo "built $tag; it runs: $engine run --rm $tag tessera --help"
