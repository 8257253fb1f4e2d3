#!/usr/bin/env python3
"""The layer checker catches what it says it does: a tree with a planted mistake of each kind
is refused with a line naming it, and the same tree without them passes. Run by CTest
(LayersCheckerTest)."""
import os
import subprocess
import sys
import tempfile

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_layers.py")


def tree(root, api_cmake, common_include="", extra=None):
    files = {
        "src/common/CMakeLists.txt": "tessera_library(tessera_common\n  SOURCES a.cc\n  DEPS fmt::fmt)\n",
        "src/common/a.cc": common_include + "int a() { return 1; }\n",
        "src/cli/CMakeLists.txt": "tessera_library(tessera_cli\n  SOURCES m.cc\n  DEPS tessera_common)\n",
        "src/cli/m.cc": '#include "common/a.h"\n',
        "src/api/CMakeLists.txt": api_cmake,
        "src/api/s.cc": '#include "common/a.h"\n',
        "include/tessera/x.h": "",
        "python/m.cc": '#include "tessera/x.h"\n',
        "tests/CMakeLists.txt": "tessera_test(t_test\n  SOURCES t/t_test.cc\n  DEPS tessera_cli tessera_proto)\n",
        "tests/t/t_test.cc": '#include "cli/m.h"\n#include "t/helper.h"\n',
        "bench/b.cc": '#include "common/a.h"\n',
    }
    files.update(extra or {})
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
    # Planted beside the clean tree: (what, files, the line the checker must say).
    planted = [
        ("a public header used below the layer implementing it",
         {"src/cli/x.cc": '#include "tessera/x.h"\n', "src/common/b.cc": '#include "tessera/x.h"\n'},
         "src/common/b.cc:1: includes tessera/x.h, implemented by cli/, a higher layer than common/"),
        ("a test including a folder that moved away", {"tests/t/u_test.cc": '#include "gone/x.h"\n'},
         "tests/t/u_test.cc:1: includes gone/, which is neither a folder of src/ nor of tests/"),
        ("a benchmark including a folder that moved away", {"bench/c.cc": '#include "gone/x.h"\n'},
         "bench/c.cc:1: includes gone/, which is neither a folder of src/ nor of tests/"),
        ("a test linking a library that moved away",
         {"tests/CMakeLists.txt": "tessera_test(t_test\n  SOURCES t/t_test.cc\n  DEPS tessera_gone)\n"},
         "tests/CMakeLists.txt:3: links tessera_gone, which no CMake file defines"),
    ]
    for what, files, want_text in planted:
        cases.append((what, good_api, "", 1, want_text, files))
    for case in cases:
        what, api, include, want_code, want_text = case[:5]
        with tempfile.TemporaryDirectory(prefix="layers-") as root:
            tree(root, api, include, case[5] if len(case) > 5 else None)
            code, out = run(root)
            if code != want_code or want_text not in out:
                failed += 1
                print(f"FAIL: {what}: exit {code}, wanted {want_code} and '{want_text}'; it said:\n{out}")
            else:
                print(f"ok: {what}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
