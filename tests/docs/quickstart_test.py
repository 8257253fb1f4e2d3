#!/usr/bin/python3
"""QuickstartTest: the README's quickstart, run as written. Every code block the README marks with
`<!-- quickstart -->` runs, in order, in one bash (`set -e`) in a fresh directory that holds the
repository's examples and deploy files and the build (as a clone after `make demo` would), with
a private login directory. A command ending in `&` runs in the background and the next command
waits until it has printed its first line (as a person waits for a server to say where it
listens). Passes when every block succeeds and a job reports its accuracy.
Usage: quickstart_test.py SOURCE_DIR BUILD_DIR"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

MARK = "<!-- quickstart -->"
TIMEOUT_S = 480


def quickstart_blocks(readme):
    blocks, lines, i = [], readme.splitlines(), 0
    while i < len(lines):
        if lines[i].strip() == MARK:
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            k = j + 1
            while k < len(lines) and not lines[k].startswith("```"):
                k += 1
            blocks.append((i + 1, lines[j + 1:k]))
            i = k
        i += 1
    return blocks


def script_of(blocks):
    """One bash script: the blocks' lines, with a wait after each background command."""
    out = ["set -euo pipefail", "set -m"]  # -m: each background command in a group of its own
    n_bg = 0
    for start, block in blocks:
        out.append("echo '== README.md:%d'" % start)
        logical, cur = [], ""
        for line in block:
            if line.rstrip().endswith("\\"):
                cur += line + "\n"
                continue
            logical.append(cur + line)
            cur = ""
        for line in logical:
            if re.search(r"&\s*$", line) and not line.rstrip().endswith("&&"):
                n_bg += 1
                log = "bg%d.out" % n_bg
                out.append(re.sub(r"&\s*$", "> %s 2>&1 &" % log, line))
                out.append("for _ in $(seq 600); do [ -s %s ] && break; sleep 0.1; done; cat %s" % (log, log))
            else:
                out.append(line)
    return "\n".join(out) + "\n"


def kill_everything_under(root):
    """Ends every process whose command line or working directory is in `root` (a server's jobs
    run in sessions of their own): SIGTERM, then SIGKILL after a grace period."""
    def pids():
        found = []
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) == os.getpid():
                continue
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    cmd = f.read().decode(errors="replace")
                cwd = os.readlink("/proc/%s/cwd" % p)
            except OSError:
                continue
            if root in cmd or cwd.startswith(root):
                found.append(int(p))
        return found
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        for p in pids():
            try:
                os.kill(p, sig)
            except OSError:
                pass
        deadline = time.time() + wait_s
        while pids() and time.time() < deadline:
            time.sleep(0.1)
    return pids()


def main(src, build):
    with open(os.path.join(src, "README.md"), encoding="utf-8") as f:
        blocks = quickstart_blocks(f.read())
    if len(blocks) < 3:
        print("QuickstartTest: found %d marked blocks in README.md, expected the quickstart's" % len(blocks))
        return 1
    work = tempfile.mkdtemp(prefix="tessera-quickstart-")
    try:
        for d in ("examples", "deploy"):
            os.symlink(os.path.join(src, d), os.path.join(work, d))
        os.symlink(build, os.path.join(work, "build"))
        script = script_of(blocks)
        with open(os.path.join(work, "quickstart.sh"), "w") as f:
            f.write(script)
        env = {
            "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME": work,
            "TESSERA_CONFIG_DIR": os.path.join(work, "config"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "LANG": "C.UTF-8",
        }
        proc = subprocess.Popen(["bash", "quickstart.sh"], cwd=work, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            print(out)
            print("QuickstartTest: the quickstart did not end within %d s" % TIMEOUT_S)
            return 1
        print(out)
        failures = []
        if proc.returncode != 0:
            failures.append("the quickstart's commands failed (exit %d): see the output above" % proc.returncode)
        if not re.search(r"job \S+ finished: accuracy 0\.[5-9]", out):
            failures.append("no job of the quickstart reported its accuracy")
        if not os.path.exists(os.path.join(work, "runs", "first", "model.tsm")):
            failures.append("runs/first/model.tsm, which the README promises, is not there")
        if not os.path.isdir(os.path.join(work, "k8s")):
            failures.append("tessera deploy k8s wrote no k8s/ directory")
        if not re.search(r"succeeded", out):
            failures.append("the platform's job did not succeed")
        for f in failures:
            print("QuickstartTest: " + f)
        return 1 if failures else 0
    finally:
        left = kill_everything_under(work)
        if left:
            print("QuickstartTest: processes left running: %s" % left)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])))
