#!/usr/bin/env python3
"""Builds every file of src/ that uses Tessera's annotated Mutex (common/mutex.h) with clang's
thread-safety analysis as errors, syntax only, with the flags CMake gave the real build.
Run by CTest (ThreadSafetyTest): `scripts/check_thread_safety.py BUILD_DIR [SOURCE_DIR]`.
A member marked GUARDED_BY(mu_) touched without mu_, or a REQUIRES(mu_) helper called without
it, fails with clang's message. Exits 1 on any error.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

CLANG_FLAGS = ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety", "-Wno-unknown-warning-option"]
# Flags of GCC's that clang does not take.
GCC_ONLY = {"-fno-math-errno"}


def annotated_headers(src):
    """The headers of src/ (as included: "dir/name.h") that include common/mutex.h."""
    found = {"common/mutex.h"}
    for root, _, files in os.walk(src):
        for name in files:
            path = os.path.join(root, name)
            if name.endswith(".h") and '#include "common/mutex.h"' in open(path, errors="replace").read():
                found.add(os.path.relpath(path, src))
    return found


def uses_mutex(path, headers):
    """Whether the file includes common/mutex.h or a header that does."""
    text = open(path, errors="replace").read()
    return any(f'#include "{h}"' in text for h in headers)


def clang_command(entry, clang):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out = [clang]
    skip = False
    for a in args[1:]:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c"):
            skip = a == "-o"
            continue
        if a in GCC_ONLY or a.startswith("-march="):
            continue
        out.append(a)
    return out + CLANG_FLAGS


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    source = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), ".."))
    clang = shutil.which("clang++") or shutil.which("clang++-14")
    if not clang:
        print("clang++ is not installed (scripts/install-deps.sh installs it)")
        return 1
    entries = json.load(open(os.path.join(build, "compile_commands.json")))
    src = os.path.join(source, "src") + os.sep
    headers = annotated_headers(src)
    chosen = [e for e in entries
              if e["file"].startswith(src) and not e["file"].endswith("_test.cc") and uses_mutex(e["file"], headers)]
    if not chosen:
        print("no file of src/ uses common/mutex.h: nothing was checked")
        return 1

    def run(entry):
        r = subprocess.run(clang_command(entry, clang), cwd=entry["directory"], capture_output=True, text=True)
        return entry["file"], r.returncode, r.stderr

    failed = 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        for file, code, err in pool.map(run, chosen):
            rel = os.path.relpath(file, source)
            if code != 0:
                failed += 1
                print(f"FAILED {rel}\n{err}")
            else:
                print(f"ok {rel}")
    print(f"{len(chosen) - failed} of {len(chosen)} files pass clang -Wthread-safety")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
