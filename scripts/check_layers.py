#!/usr/bin/env python3
"""Keeps Tessera's layers honest: one folder of src/ is one library that uses only the folders
below it. Run by CTest (LayersTest) and by hand: `scripts/check_layers.py [source dir]`.

Checks, each failure printed as `file:line: what`:
  - every folder of src/ has a layer in LAYERS below (a new folder must be placed);
  - an #include "X/..." in src/F/ names F itself or a folder of a lower layer;
  - src/F/CMakeLists.txt defines at most the library tessera_F, built from F's own files, whose
    tessera_* dependencies are all of lower layers; any other library it builds (add_library)
    links only tessera_F and lower layers' libraries;
  - the public headers (include/tessera/) include no private header, and the Python module
    (python/) is built on the public API alone.
Exits 1 if anything is wrong.
"""
import os
import re
import sys

# Lowest first. Folders on one layer may not use each other.
LAYERS = [
    ["common"],
    ["security", "sandbox"],
    ["coord", "transport", "recordio", "model_file", "checkpoint"],
    ["job", "dataset"],
    ["pserver", "client", "spec", "supervise"],
    ["master"],
    ["api"],
    ["models"],
    ["local"],
    ["deploy"],
    ["launch"],
    ["server", "remote"],
    ["cli"],
]
RANK = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}
# Folders outside src/ that a test file there may include (the test harness).
TEST_ONLY = {"harness"}
# Generated or external include roots that are not folders of src/.
NOT_FOLDERS = {"tessera", "etcd", "gtest", "gmock", "benchmark", "nlohmann", "spdlog", "fmt", "CLI", "grpcpp", "grpc",
               "google", "Eigen", "httplib", "zstd", "openssl", "pybind11"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/')


def check_includes(src, errors):
    for folder in sorted(os.listdir(src)):
        path = os.path.join(src, folder)
        if not os.path.isdir(path) or folder == "generated":
            continue
        if folder not in RANK:
            errors.append(f"src/{folder}: a folder with no layer; add it to LAYERS in scripts/check_layers.py")
            continue
        for root, _, files in os.walk(path):
            for name in sorted(files):
                if not name.endswith((".cc", ".h")):
                    continue
                file = os.path.join(root, name)
                rel = os.path.relpath(file, os.path.dirname(src))
                is_test = name.endswith("_test.cc")
                with open(file, errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        used = m.group(1)
                        if used == folder or used in NOT_FOLDERS or (is_test and used in TEST_ONLY):
                            continue
                        if used not in RANK:
                            errors.append(f"{rel}:{lineno}: includes {used}/, which is not a folder of src/")
                        elif RANK[used] >= RANK[folder]:
                            where = "the same layer as" if RANK[used] == RANK[folder] else "a higher layer than"
                            errors.append(f"{rel}:{lineno}: includes {used}/, {where} {folder}/; move the shared "
                                          f"piece down instead")


LIBRARY = re.compile(r"tessera_library\(\s*(\w+)(.*?)\)", re.S)


def check_cmake(src, errors):
    for folder in sorted(RANK):
        cmake = os.path.join(src, folder, "CMakeLists.txt")
        if not os.path.exists(cmake):
            continue
        text = open(cmake).read()
        for m in LIBRARY.finditer(text):
            name, body = m.group(1), m.group(2)
            rel = f"src/{folder}/CMakeLists.txt"
            if name != f"tessera_{folder}":
                errors.append(f"{rel}: defines {name}; the library of src/{folder}/ is tessera_{folder}")
            words = body.split()
            section = None
            for w in words:
                if w in ("SOURCES", "DEPS"):
                    section = w
                elif section == "SOURCES" and "/" in w:
                    errors.append(f"{rel}: {name} builds {w}, a file of another folder")
                elif section == "DEPS" and w.startswith("tessera_"):
                    dep = w[len("tessera_"):]
                    if dep == "proto":
                        continue
                    if dep not in RANK:
                        errors.append(f"{rel}: {name} links {w}, which is not a folder's library")
                    elif RANK[dep] >= RANK[folder]:
                        errors.append(f"{rel}: {name} links {w}, which is not of a lower layer")


OTHER_LIBRARY = re.compile(r"\badd_library\(\s*(\w+)")
LINKS = re.compile(r"target_link_libraries\(\s*(\w+)(.*?)\)", re.S)


def check_other_libraries(src, errors):
    """A library a folder builds beside its own (add_library: src/api's libtessera_c.so) links only
    its folder's library and lower layers', as tessera_library's DEPS must."""
    for folder in sorted(RANK):
        cmake = os.path.join(src, folder, "CMakeLists.txt")
        if not os.path.exists(cmake):
            continue
        text = open(cmake).read()
        others = set(OTHER_LIBRARY.findall(text))
        for m in LINKS.finditer(text):
            name = m.group(1)
            if name not in others:
                continue
            for w in m.group(2).split():
                if not w.startswith("tessera_"):
                    continue
                dep = w[len("tessera_"):]
                if dep in ("proto", folder):
                    continue
                rel = f"src/{folder}/CMakeLists.txt"
                if dep not in RANK:
                    errors.append(f"{rel}: {name} links {w}, which is not a folder's library")
                elif RANK[dep] >= RANK[folder]:
                    errors.append(f"{rel}: {name} links {w}, which is not of a lower layer")


def check_only_public(folder, rel, what, remedy, errors):
    """Every #include "X/..." of the files in `folder` names tessera/ (the public API)."""
    for name in sorted(os.listdir(folder)):
        if not name.endswith((".cc", ".h")):
            continue
        with open(os.path.join(folder, name)) as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if m and m.group(1) != "tessera":
                    errors.append(f"{rel}/{name}:{lineno}: {what} includes the private {m.group(1)}/{remedy}")


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    errors = []
    check_includes(os.path.join(top, "src"), errors)
    check_cmake(os.path.join(top, "src"), errors)
    check_other_libraries(os.path.join(top, "src"), errors)
    check_only_public(os.path.join(top, "include", "tessera"), "include/tessera", "a public header", "", errors)
    check_only_public(os.path.join(top, "python"), "python", "the Python module",
                      "; use (or add to) the public API in include/tessera/", errors)
    for e in errors:
        print(e)
    if errors:
        print(f"{len(errors)} layering problem(s)")
        return 1
    print(f"layers ok: {sum(len(f) for f in LAYERS)} folders in {len(LAYERS)} layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
