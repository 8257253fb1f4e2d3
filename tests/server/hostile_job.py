"""A platform user's hostile trainer (tests/server/sandbox_test.cc): tries, from inside its job,
everything another namespace's job or the server holds, and says what happened to each try on a
line of its own: "BLOCKED <what>: <how>" or "BREACH <what>: <how>". Then, by --mode, it runs
into one of its job's limits: a fork bomb, memory past its limit, or its namespace's storage.
Every loop is bounded in count and time."""
import argparse
import json
import os
import socket
import sys
import time
import urllib.request

p = argparse.ArgumentParser()
p.add_argument("--data-dir", required=True)     # the server's, as the host sees it
p.add_argument("--a-job", required=True)        # the other user's running job
p.add_argument("--a-etcd", default="")          # its etcd, host:port (in its own network)
p.add_argument("--a-console", default="")       # its master's console, http://host:port
p.add_argument("--a-pids", default="")          # its processes, as the host numbers them
p.add_argument("--server-port", type=int, required=True)
p.add_argument("--host-ip", default="")         # the host's own address on its network
p.add_argument("--secret", required=True)       # a value of the server's environment
p.add_argument("--mode", choices=["attacks", "forkbomb", "memory", "disk"], default="attacks")
args = p.parse_args()


def say(ok, what, how):
    print(("BLOCKED " if ok else "BREACH ") + what + ": " + str(how).replace("\n", " ")[:300], flush=True)


def read(path, n=64):
    with open(path, "rb") as f:
        return f.read(n)


def try_read(what, paths):
    for path in paths:
        try:
            data = read(path)
            say(False, what, "read %r from %s" % (data[:16], path))
            return
        except OSError as e:
            last = "%s: %s" % (path, e.strerror)
    say(True, what, last)


def walk(top, limit=20000):
    """Every path under `top`, without following links or entering the kernel's files."""
    seen = 0
    for root, dirs, files in os.walk(top, followlinks=False):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev")]
        for name in dirs + files:
            seen += 1
            if seen > limit:
                return
            yield os.path.join(root, name)


def attacks():
    a = args.a_job
    print("RUNS AS uid=%d gid=%d groups=%s host=%s" % (os.getuid(), os.getgid(), os.getgroups(), socket.gethostname()),
          flush=True)
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
    caps, nnp = int(status["CapEff"].strip(), 16), status.get("NoNewPrivs", "0").strip()
    say(os.getuid() != 0 and caps == 0 and nnp == "1", "privileges",
        "uid %d, effective capabilities %x, no_new_privs %s" % (os.getuid(), caps, nnp))
    # The server's database and files.
    try_read("server-db", [args.data_dir + "/server.db", "/data/../server.db", "/job/../server.db"])
    try:
        os.stat(args.data_dir)
        say(False, "data-dir", "the server's data directory is visible: " + args.data_dir)
    except OSError as e:
        say(True, "data-dir", e.strerror)
    found = [x for x in walk("/") if x.endswith("server.db") or "/jobs/" + a in x]
    say(not found, "search", found[:3] if found else "no server.db, no job of another user under /")

    # The server's environment.
    leaks = [k for k, v in os.environ.items() if args.secret in v]
    for pid in [x for x in os.listdir("/proc") if x.isdigit()]:
        try:
            if args.secret.encode() in read("/proc/%s/environ" % pid, 1 << 20):
                leaks.append("/proc/%s/environ" % pid)
        except OSError:
            pass
    say(not leaks, "server-env", leaks or "not in its environment nor any it can read (%d variables)" % len(os.environ))

    # The other namespace's data sets: its unshared one, and writing into the shared one.
    try_read("a-dataset", [args.data_dir + "/datasets/ada/secret/manifest.json", "/data/ada/secret/manifest.json"])
    try:
        shown = os.listdir("/data/ada")
        say("secret" not in shown, "a-dataset-list", "/data/ada holds " + ",".join(shown))
    except OSError as e:
        say(True, "a-dataset-list", e.strerror)
    try:
        with open("/data/ada/fm/intruder", "w") as f:
            f.write("mine now")
        say(False, "write-shared", "wrote /data/ada/fm/intruder")
    except OSError as e:
        say(True, "write-shared", e.strerror)
    try:
        chunk = sorted(x for x in os.listdir("/data/ada/fm") if x.endswith(".rio"))[0]
        with open("/data/ada/fm/" + chunk, "r+b") as f:
            f.write(b"\0")
        say(False, "corrupt-shared", "overwrote " + chunk)
    except (OSError, IndexError) as e:
        say(True, "corrupt-shared", getattr(e, "strerror", e))

    # The other job: its logs and model, its processes, signals.
    try_read("a-logs", [args.data_dir + "/jobs/%s/run/logs/trainer-0.log" % a,
                        args.data_dir + "/jobs/%s/supervisor.log" % a])
    try_read("a-model", [args.data_dir + "/jobs/%s/run/model.tsm" % a])
    mine = []
    for pid in [x for x in os.listdir("/proc") if x.isdigit()]:
        try:
            cmd = read("/proc/%s/cmdline" % pid, 4096).replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        mine.append(cmd)
        # Another job's processes name it (tessera local --job ID, its pservers' --job ID); the
        # server's is `tessera server --...`.
        if ("--job " + a) in cmd or " server --" in cmd:
            say(False, "proc", "sees pid %s: %s" % (pid, cmd))
            break
    else:
        say(True, "proc", "sees %d processes, all its job's own" % len(mine))
    hit = []
    for pid in [int(x) for x in args.a_pids.split(",") if x]:
        try:
            os.kill(pid, 0)
            hit.append(pid)
        except ProcessLookupError:
            pass
        except PermissionError:
            hit.append(pid)
    say(not hit, "signals", ("reaches pids %s" % hit) if hit else "none of %s exists here" % args.a_pids)
    try:
        os.setuid(0)
        say(False, "root", "became root")
    except PermissionError as e:
        say(True, "root", e.strerror)
    try_read("shadow", ["/etc/shadow"])

    # The other job's etcd and console, the server's API, the host.
    def http(url, body=None):
        req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        return urllib.request.urlopen(req, timeout=3).read(4096)

    if args.a_etcd:
        import base64
        key = base64.b64encode(("/tessera/%s/config" % a).encode()).decode()
        try:
            got = http("http://%s/v3/kv/range" % args.a_etcd, json.dumps({"key": key}).encode())
            say(b"kvs" not in got, "a-etcd", got[:120])
        except Exception as e:
            say(True, "a-etcd", e)
    if args.a_console:
        try:
            got = http(args.a_console.rstrip("/") + "/api/job")
            say(a.encode() not in got, "a-console", got[:120])
        except Exception as e:
            say(True, "a-console", e)
    for host in ["127.0.0.1"] + ([args.host_ip] if args.host_ip else []):
        try:
            got = http("http://%s:%d/api/v1/me" % (host, args.server_port))
            say(False, "server-api", "%s answered %r" % (host, got[:80]))
        except urllib.error.HTTPError as e:
            say(False, "server-api", "%s answered HTTP %d" % (host, e.code))
        except Exception as e:
            say(True, "server-api", "%s: %s" % (host, e))
    print("ATTACKS DONE", flush=True)


def fork_bomb():
    # Every process forks on until the kernel refuses, for at most two minutes.
    first, end, refused = os.getpid(), time.time() + 120, 0
    while time.time() < end:
        try:
            if os.fork() == 0:
                continue
        except OSError:
            refused += 1
            if refused == 1 and os.getpid() == first:
                print("fork refused: the job's process limit", flush=True)
        time.sleep(0.05)
    os._exit(0)


def memory():
    kept, end = [], time.time() + 120
    while time.time() < end and len(kept) < 1024:
        kept.append(bytearray(64 << 20))
        print("holding %d MiB" % (64 * len(kept)), flush=True)


def disk():
    try:
        with open("/job/run/one-big-file", "wb") as f:
            f.seek(300 << 20)  # past what its namespace's storage has left, and past 256 MiB
            f.write(os.urandom(1 << 20))
        say(False, "file-size", "wrote past its namespace's storage in one file")
    except OSError as e:
        say(True, "file-size", e.strerror)
    end, n = time.time() + 120, 0
    while time.time() < end and n < 4096:
        with open("/job/run/fill-%d" % n, "wb") as f:
            f.write(os.urandom(1 << 20))
        n += 1
        time.sleep(0.01)
    print("wrote %d MiB" % n, flush=True)


if args.mode == "attacks":
    attacks()
    fork_bomb()
elif args.mode == "forkbomb":
    fork_bomb()
elif args.mode == "memory":
    memory()
else:
    disk()
time.sleep(300)  # the job is expected to be ended by its limit before this
