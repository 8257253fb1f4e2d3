#!/usr/bin/env python3
"""Keeps Tessera's layers honest: one folder of src/ is one library that uses only the folders
below it. Run by CTest (LayersTest) and by hand: `scripts/check_layers.py [source dir]`.

Checks, each failure printed as `file:line: what`:
  - every folder of src/ has a layer in LAYERS below (a new folder must be placed);
  - an #include "X/..." in src/F/ names F itself or a folder of a lower layer, and an #include
    "tessera/X.h" (a public header) one implemented by F or a lower layer (the implementer: the
    folder with a source file whose own header it is);
  - src/F/CMakeLists.txt defines at most the library tessera_F, built from F's own files, whose
    tessera_* dependencies are all of lower layers; any other library it builds (add_library)
    links only tessera_F and lower layers' libraries;
  - the public headers (include/tessera/) include no private header, and the Python module
    (python/) is built on the public API alone;
  - tests/ and bench/ include only folders that exist (of src/, of tests/, the harness) and link
    only libraries some CMake file defines: after a move, nothing names the old place.
Exits 1 if anything is wrong.
"""
import os
import re
import sys

# Lowest first. Folders on one layer may not use each other.
LAYERS = [
    ["common"],
    ["security", "sandbox"],
    ["coord", "transport", "recordio", "model_file"],
    ["job", "dataset"],
    ["checkpoint"],
    ["pserver", "client", "spec", "supervise"],
    ["master"],
    ["api"],
    ["models"],
    ["local"],
    ["deploy"],
    ["launch"],
    ["server_store"],
    ["server_backends"],
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
PUBLIC = re.compile(r'^\s*#\s*include\s+"tessera/([A-Za-z0-9_.]+)"')


def includes(file):
    """(line number, the folder it names, the line) of each #include "X/..." of a file."""
    with open(file, errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield lineno, m.group(1), line


def public_implementers(src):
    """Each public header (include/tessera/X.h) and the folder that implements it: the one with a
    source file whose own header (its first include) it is. Headers no folder implements (header-
    only, generated) are not in the map."""
    found = {}
    for folder in sorted(RANK):
        for root, _, files in os.walk(os.path.join(src, folder)):
            for name in sorted(files):
                if not name.endswith(".cc") or name.endswith("_test.cc"):
                    continue
                with open(os.path.join(root, name), errors="replace") as f:
                    for line in f:
                        if INCLUDE.match(line):
                            m = PUBLIC.match(line)
                            if m:
                                found.setdefault(m.group(1), folder)
                            break
    return found


def check_includes(src, errors):
    implementers = public_implementers(src)
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
                for lineno, used, line in includes(file):
                    if used == "tessera":
                        # A public header is of the layer of the folder that implements it.
                        header = PUBLIC.match(line)
                        impl = implementers.get(header.group(1)) if header else None
                        if impl and impl != folder and RANK[impl] >= RANK[folder]:
                            where = "the same layer as" if RANK[impl] == RANK[folder] else "a higher layer than"
                            errors.append(f"{rel}:{lineno}: includes tessera/{header.group(1)}, implemented by "
                                          f"{impl}/, {where} {folder}/")
                        continue
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


FUNCTIONS = {"tessera_test", "tessera_library", "tessera_unity"}
TARGET_WORD = re.compile(r"\b(tessera_\w+)\b(?!\s*\()")


def check_tests_and_bench(top, errors):
    """tests/ and bench/ include only folders that exist (of src/, of tests/, the harness), and their
    CMake files link only libraries that exist: after a folder moves, nothing still names it."""
    src = os.path.join(top, "src")
    tests = os.path.join(top, "tests")
    libraries = {f"tessera_{folder}" for folder in RANK} | {"tessera_proto"}
    for base in (src, tests, os.path.join(top, "bench")):
        for root, _, files in os.walk(base):
            if "CMakeLists.txt" in files:
                libraries |= set(OTHER_LIBRARY.findall(open(os.path.join(root, "CMakeLists.txt")).read()))
    test_folders = {d for d in os.listdir(tests) if os.path.isdir(os.path.join(tests, d))} if os.path.isdir(tests) else set()
    for part in ("tests", "bench"):
        base = os.path.join(top, part)
        if not os.path.isdir(base):
            continue
        for root, _, files in os.walk(base):
            for name in sorted(files):
                file = os.path.join(root, name)
                rel = os.path.relpath(file, top)
                if name == "CMakeLists.txt":
                    for lineno, line in enumerate(open(file), 1):
                        for word in TARGET_WORD.findall(line.split("#")[0]):
                            if word not in libraries and word not in FUNCTIONS:
                                errors.append(f"{rel}:{lineno}: links {word}, which no CMake file defines")
                    continue
                if not name.endswith((".cc", ".h")):
                    continue
                for lineno, used, _ in includes(file):
                    if used in RANK or used in test_folders or used in NOT_FOLDERS or used in TEST_ONLY:
                        continue
                    errors.append(f"{rel}:{lineno}: includes {used}/, which is neither a folder of src/ nor of "
                                  f"tests/")


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
    check_tests_and_bench(top, errors)
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
