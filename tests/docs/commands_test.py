#!/usr/bin/python3
"""DocsCommandsTest: every `tessera` command line the README and the guides show (in code blocks,
and in backquotes in the prose) names commands that exist and flags those commands take, checked
against the real program's --help; and docs/commands.md's table of every command lists exactly the
commands `tessera --help` has. Prints each mistake with its file and line; exits 1 if any.
Usage: commands_test.py SOURCE_DIR TESSERA_BINARY"""
import functools
import glob
import os
import re
import shlex
import subprocess
import sys

SPAN = re.compile(r"`(tessera [^`]+)`")
# What ends the part of a shell line that belongs to tessera: another command, a comment, a pipe.
STOPS = {"|", "||", "&&", ";", "&", "#", "--", ">", "2>&1", "<"}


@functools.lru_cache(maxsize=None)
def help_text(binary, path):
    out = subprocess.run([binary, *path, "--help"], capture_output=True, text=True, timeout=30,
                         env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})
    return out.stdout + out.stderr


def subcommands(binary, path):
    """The names under "Subcommands:" in the help of `tessera PATH`."""
    names, inside = set(), False
    for line in help_text(binary, path).splitlines():
        if line.startswith("Subcommands:"):
            inside = True
            continue
        if inside:
            m = re.match(r"^  ([a-z][a-z0-9-]*)\s", line + " ")
            if m:
                names.add(m.group(1))
            elif line and not line.startswith(" "):
                inside = False
    return names


def check_line(binary, text, where, mistakes):
    """Checks one command line that starts with `tessera`."""
    text = text.replace("\\|", "|")  # a pipe escaped in a table cell: alternatives, `sync|async`
    try:
        tokens = shlex.split(text, comments=False)
    except ValueError:
        tokens = text.split()
    if not tokens or tokens[0] != "tessera":
        return 0
    path = []
    rest = tokens[1:]
    while rest and rest[0] in subcommands(binary, tuple(path)):
        path.append(rest.pop(0))
    if rest and not path and re.match(r"^[a-z][a-z0-9-]*$", rest[0]):
        mistakes.append("%s: `tessera %s`: no such command" % (where, rest[0]))
        return 1
    helps = help_text(binary, tuple(path))
    for t in rest:
        if t in STOPS or t.startswith("#"):
            break
        if t.startswith("--") and len(t) > 2:
            flag = t.split("=", 1)[0]
            if flag in ("--help", "--version") and not path:
                continue
            if not re.search(r"(^|[\s,])%s([\s=,]|$)" % re.escape(flag), helps, re.M):
                mistakes.append("%s: `tessera %s` has no flag %s" % (where, " ".join(path), flag))
        elif re.match(r"^-[A-Za-z]$", t):
            if not re.search(r"(^|\s)%s," % re.escape(t), helps, re.M):
                mistakes.append("%s: `tessera %s` has no flag %s" % (where, " ".join(path), t))
    return 1


def logical_lines(block):
    """The lines of a code block with backslash continuations joined, each from `tessera` on
    (after a prompt, sudo, an environment assignment or `exec`)."""
    joined, cur = [], ""
    for line in block:
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        joined.append(cur + line)
        cur = ""
    if cur:
        joined.append(cur)
    out = []
    for line in joined:
        for part in re.split(r"\s(?:;|&&|\|\|)\s", line):
            m = re.search(r"(?:^|[\s(])(tessera\s.*)$", part)
            if m and not re.match(r"^\s*#", part):
                out.append(m.group(1))
    return out


def check_page(binary, page, src, mistakes):
    rel = os.path.relpath(page, src)
    checked = 0
    fence = None
    block = []
    with open(page, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for n, line in enumerate(lines, 1):
        if line.startswith("```"):
            if fence is None:
                fence, block, start = line[3:].strip(), [], n + 1
            else:
                if fence in ("sh", "bash", "console"):
                    for text in logical_lines(block):
                        checked += check_line(binary, text, "%s:%d" % (rel, start), mistakes)
                fence = None
            continue
        if fence is not None:
            block.append(line)
            continue
        for m in SPAN.finditer(line):
            span = m.group(1)
            if re.search(r"[<>]|\.\.\.|[A-Z]{3,}\b(?!=)", span.split(" ")[1]):  # `tessera <command>`
                continue
            checked += check_line(binary, span, "%s:%d" % (rel, n), mistakes)
    return checked


def check_command_table(binary, src, mistakes):
    """docs/commands.md's "Every command" table names every command `tessera --help` lists."""
    page = os.path.join(src, "docs", "commands.md")
    with open(page, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"## Every command\n(.*?)\n## ", text, re.S)
    if not m:
        mistakes.append("docs/commands.md: no \"## Every command\" section")
        return
    table = m.group(1)
    named = set(re.findall(r"`([a-z][a-z0-9-]*)", table))
    real = subcommands(binary, ())
    for c in sorted(real - named):
        mistakes.append("docs/commands.md: the table of every command leaves out `%s`" % c)
    first_words = {w for w in named if w not in real}
    # Sub-subcommands (`create`, `k8s`, `set`, ...) may appear in it too; anything else is a mistake.
    subs = set()
    for c in real:
        subs |= subcommands(binary, (c,))
    for w in sorted(first_words - subs):
        mistakes.append("docs/commands.md: the table of every command names `%s`, which is not a command" % w)


def main(src, binary):
    pages = [os.path.join(src, "README.md"), os.path.join(src, "bench", "README.md")]
    pages += sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    mistakes = []
    checked = sum(check_page(binary, p, src, mistakes) for p in pages)
    check_command_table(binary, src, mistakes)
    for m in mistakes:
        print(m)
    print("DocsCommandsTest: %d pages, %d command lines checked, %d mistakes" % (len(pages), checked, len(mistakes)))
    if checked < 50:
        print("DocsCommandsTest: fewer command lines than expected: is the parser broken?")
        return 1
    return 1 if mistakes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
