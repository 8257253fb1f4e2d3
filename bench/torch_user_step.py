#!/usr/bin/python3
"""The PyTorch MLP's step timed as a user's script times it (issue 53): 784-H-H-10, batch 64, Adam;
each step's zero_grad, forward with the loss, backward and optimizer step (with the loss read by
.item(), as a script that reports it does) timed by perf_counter, the batch read outside the
timing; the median over the pass.

As every trainer of a `tessera local --trainer-cmd` job it trains through tessera.Optimizer and
writes the figures to $TESSERA_RUN_DIR/user-step-$TESSERA_TRAINER_ID.json. With --alone --store S,
one process with torch.optim.Adam (the machine's default threads unless --threads); with --ddp
--store S (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set), one rank of DistributedDataParallel
over gloo, each rank every WORLD_SIZE-th batch. Both print the JSON.

With --compare --store S (a store holding "fm"), runs them all in one go, --rounds times
alternated: one process with the default threads and with one thread, DDP with 2 ranks, and
Tessera (2 trainers x 2 pservers, sync, shm; with --no-wait as well) and prints a Markdown table.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PHASES = ("zero_grad", "forward", "backward", "step")
WARMUP = 20  # steps not timed (allocations, the first pulls)


def model(torch, hidden):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                               torch.nn.ReLU(), torch.nn.Linear(hidden, 10))


def user_loop(batches, net, opt, step):
    """The loop a user writes, each step timed from zero_grad to the optimizer's step."""
    import torch
    import torch.nn.functional as F
    import tessera
    steps, phases = [], {k: [] for k in PHASES}
    for i, batch in enumerate(batches):
        pixels, labels, _ = tessera.decode_images(batch)
        x, y = torch.from_numpy(pixels).float().div_(255.0), torch.from_numpy(labels)
        t0 = time.perf_counter()
        opt.zero_grad()
        t1 = time.perf_counter()
        loss = F.cross_entropy(net(x), y)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        step(len(y), loss.item())
        t4 = time.perf_counter()
        if i < WARMUP:
            continue
        steps.append((t4 - t0) * 1e3)
        for k, a, b in zip(PHASES, (t0, t1, t2, t3), (t1, t2, t3, t4)):
            phases[k].append((b - a) * 1e3)
    if not steps:
        return {"steps": 0}
    out = {"steps": len(steps), "median_ms": statistics.median(steps), "mean_ms": statistics.fmean(steps)}
    for k in PHASES:
        out[k + "_median_ms"] = statistics.median(phases[k])
    return out


def run_one(a):
    import torch
    import tessera
    if a.threads:
        torch.set_num_threads(a.threads)
    net = model(torch, a.hidden)
    if a.alone or a.ddp:
        batches = list(tessera.reader("fm", store=a.store).batches(a.batch))
        if a.ddp:
            import torch.distributed as dist
            dist.init_process_group("gloo")
            rank, size = dist.get_rank(), dist.get_world_size()
            net = torch.nn.parallel.DistributedDataParallel(net)
            batches = batches[rank::size][:len(batches) // size]  # the same steps on every rank
        opt = torch.optim.Adam(net.parameters(), lr=0.001)
        out = user_loop(batches, net, opt, lambda n, cost: opt.step())
        out["threads"] = torch.get_num_threads()
        if not a.ddp or dist.get_rank() == 0:
            print(json.dumps(out), flush=True)
        if a.ddp:
            dist.destroy_process_group()
        return 0
    tessera.init()
    opt = tessera.Optimizer(net)
    out = user_loop(tessera.reader().batches(a.batch), net, opt,
                    lambda n, cost: opt.step(n, cost, wait=not a.no_wait))
    opt.wait()
    out["threads"] = torch.get_num_threads()
    out["ahead"] = tessera.session().steps_ahead()  # forwards begun on values written in place
    path = os.path.join(os.environ["TESSERA_RUN_DIR"], "user-step-%s.json" % os.environ["TESSERA_TRAINER_ID"])
    with open(path + ".tmp", "w") as f:
        json.dump(out, f)
    os.replace(path + ".tmp", path)
    tessera.finish()
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def last_json(text):
    at = text.rfind('{"steps"')
    if at < 0:
        raise RuntimeError("no figures in the output:\n" + text[-2000:])
    return json.loads(text[at:].splitlines()[0])


def spawn(argv, env, log):
    # Its own process group, so a failure or Ctrl-C here ends it and its children.
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def finish(procs, timeout):
    """Waits for every process (killing the groups of any still running at the deadline)."""
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 15)
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, 9)
                    p.wait()
    bad = [p for p in procs if p.returncode != 0]
    if bad:
        raise RuntimeError("%s exited with %d" % (" ".join(bad[0].args), bad[0].returncode))


def compare(a):
    tessera_cmd = os.path.abspath(a.tessera)
    python = sys.executable
    me = os.path.abspath(__file__)
    base = {**os.environ, "PYTHONPATH": os.path.abspath(os.path.join(os.path.dirname(tessera_cmd), "..", "python"))}
    model_args = ["--hidden", str(a.hidden), "--batch", str(a.batch)]
    work = tempfile.mkdtemp(prefix="torch-user-step-")
    rows = {}

    def add(name, figures):
        rows.setdefault(name, []).append(figures)

    def alone(threads):
        env = dict(base)
        if threads:
            for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                env[v] = str(threads)
        else:
            for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                env.pop(v, None)
        with open(os.path.join(work, "alone.log"), "w+") as log:
            p = spawn([python, me, "--alone", "--store", a.store] + model_args, env, log)
            finish([p], 600)
            log.seek(0)
            return last_json(log.read())

    def ddp():
        port = free_port()
        procs, logs = [], []
        for rank in range(2):
            env = dict(base, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                       OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
            logs.append(open(os.path.join(work, "ddp-%d.log" % rank), "w+"))
            procs.append(spawn([python, me, "--ddp", "--store", a.store] + model_args, env, logs[-1]))
        try:
            finish(procs, 600)
            logs[0].seek(0)
            return last_json(logs[0].read())
        finally:
            for f in logs:
                f.close()

    def through_tessera(no_wait):
        run = tempfile.mkdtemp(prefix="run-", dir=work)
        cmd = " ".join([python, me] + model_args + (["--no-wait"] if no_wait else []))
        argv = [tessera_cmd, "local", "--run", run + "/job", "--store", a.store, "--dataset", "fm", "--pservers",
                str(a.pservers), "--trainers", "2", "--mode", "sync", "--optimizer", "adam:lr=0.001",
                "--transport", "shm", "--trainer-cmd", cmd]
        with open(os.path.join(run, "local.log"), "w") as log:
            finish([spawn(argv, base, log)], 900)
        out = []
        for t in ("0", "1"):
            with open(os.path.join(run, "job", "user-step-%s.json" % t)) as f:
                out.append(json.load(f))
        return out

    try:
        for r in range(a.rounds):
            print("round %d of %d" % (r + 1, a.rounds), file=sys.stderr, flush=True)
            add("one process, default threads", [alone(0)])
            add("one process, one thread", [alone(1)])
            add("DistributedDataParallel, gloo, 2 ranks (rank 0)", [ddp()])
            add("Tessera, 2 x %d, step()" % a.pservers, through_tessera(False))
            add("Tessera, 2 x %d, step(wait=False)" % a.pservers, through_tessera(True))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    ref = statistics.median(f["median_ms"] for runs in rows["one process, default threads"] for f in runs)
    print("\nPyTorch MLP 784-%d-%d-10, batch %d, Adam; each trainer's median step over the pass "
          "(zero_grad, forward, backward, step), ms; %d rounds\n" % (a.hidden, a.hidden, a.batch, a.rounds))
    print("| setup | median step ms, each run | zero_grad / forward / backward / step (last run) "
          "| against one process | forwards begun ahead (last run) |")
    print("|---|---|---|---|---|")
    for name, runs in rows.items():
        medians = [f["median_ms"] for fs in runs for f in fs]
        last = runs[-1][0]
        split = " / ".join("%.3f" % last[k + "_median_ms"] for k in PHASES)
        ahead = ", ".join("%d of %d" % (f["ahead"], f["steps"] + WARMUP) for f in runs[-1]) if "ahead" in last else ""
        print("| %s | %s | %s | %.2fx | %s |" % (name, ", ".join("%.3f" % m for m in medians), split,
                                                 statistics.median(medians) / ref, ahead))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--alone", action="store_true", help="one process, no Tessera (needs --store)")
    ap.add_argument("--ddp", action="store_true", help="one rank of DistributedDataParallel (needs --store)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--no-wait", action="store_true", help="through Tessera: step(wait=False)")
    ap.add_argument("--store", default=None, help="a store holding the data set 'fm'")
    ap.add_argument("--compare", action="store_true", help="run every setup and print a table")
    ap.add_argument("--rounds", type=int, default=2, help="with --compare: rounds alternated")
    ap.add_argument("--pservers", type=int, default=2, help="with --compare: the job's pservers")
    ap.add_argument("--tessera", default=os.path.join(HERE, "..", "build", "src", "tessera"),
                    help="with --compare: the tessera command")
    ap.add_argument("--keep", action="store_true", help="with --compare: keep the runs' directories")
    a = ap.parse_args()
    if a.hidden < 1 or a.batch < 1 or a.rounds < 1 or a.pservers < 1 or a.threads < 0:
        ap.error("--hidden, --batch, --rounds and --pservers must be at least 1, --threads at least 0")
    if (a.alone or a.ddp or a.compare) and not a.store:
        ap.error("--alone, --ddp and --compare need --store (a store holding 'fm')")
    if a.compare:
        return compare(a)
    return run_one(a)


if __name__ == "__main__":
    raise SystemExit(main())
