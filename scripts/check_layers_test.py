#!/usr/bin/env python3
"""The layer checker catches what it says it does: a tree with a planted mistake of each kind
is refused with a line naming it, and the same tree without them passes. Run by CTest
(LayersCheckerTest)."""
import os
import subprocess
import sys
import tempfile

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_layers.py")


def tree(root, api_cmake, common_include=""):
    files = {
        "src/common/CMakeLists.txt": "tessera_library(tessera_common\n  SOURCES a.cc\n  DEPS fmt::fmt)\n",
        "src/common/a.cc": common_include + "int a() { return 1; }\n",
        "src/cli/CMakeLists.txt": "tessera_library(tessera_cli\n  SOURCES m.cc\n  DEPS tessera_common)\n",
        "src/cli/m.cc": '#include "common/a.h"\n',
        "src/api/CMakeLists.txt": api_cmake,
        "src/api/s.cc": '#include "common/a.h"\n',
        "include/tessera/x.h": "",
        "python/m.cc": '#include "tessera/x.h"\n',
    }
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    # Every other folder the checker knows, empty, so that only these three speak.
    sys.path.insert(0, os.path.dirname(CHECKER))
    import check_layers
    for folder in check_layers.RANK:
        os.makedirs(os.path.join(root, "src", folder), exist_ok=True)


def run(root):
    p = subprocess.run([sys.executable, CHECKER, root], capture_output=True, text=True)
    return p.returncode, p.stdout


def main():
    good_api = ("tessera_library(tessera_api\n  SOURCES s.cc\n  DEPS tessera_common)\n"
                "add_library(tessera_c SHARED c.cc)\n"
                "target_link_libraries(tessera_c PRIVATE tessera_api tessera_common)\n")
    cases = [
        ("a clean tree", good_api, "", 0, "layers ok"),
        ("a second library linking a higher layer", good_api.replace("tessera_api tessera_common",
                                                                      "tessera_api tessera_cli"),
         "", 1, "src/api/CMakeLists.txt: tessera_c links tessera_cli, which is not of a lower layer"),
        ("an include of a higher layer", good_api, '#include "cli/m.h"\n', 1,
         "src/common/a.cc:1: includes cli/, a higher layer than common/"),
    ]
    failed = 0
    for what, api, include, want_code, want_text in cases:
        with tempfile.TemporaryDirectory(prefix="layers-") as root:
            tree(root, api, include)
            code, out = run(root)
            if code != want_code or want_text not in out:
                failed += 1
                print(f"FAIL: {what}: exit {code}, wanted {want_code} and '{want_text}'; it said:\n{out}")
            else:
                print(f"ok: {what}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
