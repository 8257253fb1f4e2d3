#!/usr/bin/python3
"""DocsLinksTest: every relative link of the README and the guides (README.md, docs/*.md,
bench/README.md) resolves, and every file of the repository they name in backquotes
(`src/.../x.cc`, `tests/.../y.py`, ...) exists. Prints each broken one with its file and line;
exits 1 if any. Usage: links_test.py SOURCE_DIR"""
import glob
import os
import re
import sys

ROOTS = ("src", "tests", "bench", "scripts", "docs", "examples", "deploy", "include", "python", "web", "proto")
LINK = re.compile(r"\]\(([^)\s#]+)(#[^)]*)?\)")
PATH = re.compile(r"`((?:%s)/[A-Za-z0-9_./@-]+\.[A-Za-z0-9]+)`" % "|".join(ROOTS))


def main(src):
    pages = [os.path.join(src, "README.md"), os.path.join(src, "bench", "README.md")]
    pages += sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    broken = []
    for page in pages:
        here = os.path.dirname(page)
        with open(page, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for m in LINK.finditer(line):
                    target = m.group(1)
                    if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                        continue
                    if not os.path.exists(os.path.normpath(os.path.join(here, target))):
                        broken.append("%s:%d: link to %s, which does not exist" % (os.path.relpath(page, src), n, target))
                for m in PATH.finditer(line):
                    path = m.group(1)
                    if not os.path.exists(os.path.join(src, path)):
                        broken.append("%s:%d: names %s, which does not exist" % (os.path.relpath(page, src), n, path))
    for b in broken:
        print(b)
    print("DocsLinksTest: %d pages, %d broken" % (len(pages), len(broken)))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")))
