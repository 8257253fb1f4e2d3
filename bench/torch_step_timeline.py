#!/usr/bin/python3
"""Where a PyTorch trainer's step goes (step_timeline, issue 23): the MLP 784-H-H-10 with batch
64, one torch thread. Run as every trainer of a `tessera local --trainer-cmd` job, it times each
step's phases (the batch read and decoded, forward with the loss, zero_grad and backward,
tessera's step: the gradients scaled and pushed, the pservers' work, the parameters pulled back
in place) and writes the means (ms) to $TESSERA_RUN_DIR/timeline-$TESSERA_TRAINER_ID.json; with
--overlap the gradients are pushed during backward (tessera.Optimizer(overlap=True)); with
--no-wait step(wait=False) returns with the pulls on their way (the next batch is read meanwhile;
the forward waits for each layer's parameters, so that wait counts as forward). With
--alone --store S, the same steps in one process with torch.optim.Adam; prints the JSON. With
--ddp --store S (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set), one rank of PyTorch
DistributedDataParallel over gloo, each rank taking every WORLD_SIZE-th batch; rank 0 prints the
JSON."""
import argparse
import json
import os
import time

import torch
import torch.nn.functional as F

import tessera

WARMUP = 50  # steps not timed


def model(hidden):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                               torch.nn.ReLU(), torch.nn.Linear(hidden, 10))


def to_tensors(batch):
    pixels, labels, _ = tessera.decode_images(batch)
    return torch.from_numpy(pixels).float().div_(255.0), torch.from_numpy(labels)


def timed_loop(batches, step_fn, net, backward_fn=None):
    """Runs every batch; returns the mean ms of each phase over the timed steps."""
    sums = {"data": 0.0, "forward": 0.0, "backward": 0.0, "step": 0.0}
    steps = 0
    it = iter(batches)
    while True:
        t0 = time.perf_counter()
        try:
            batch = next(it)
        except StopIteration:
            break
        x, y = to_tensors(batch)
        t1 = time.perf_counter()
        loss = F.cross_entropy(net(x), y)
        t2 = time.perf_counter()
        for p in net.parameters():
            p.grad = None
        if backward_fn:
            backward_fn(len(y), loss)
        else:
            loss.backward()
        t3 = time.perf_counter()
        step_fn(len(y), loss)
        t4 = time.perf_counter()
        steps += 1
        if steps <= WARMUP:
            continue
        for k, a, b in (("data", t0, t1), ("forward", t1, t2), ("backward", t2, t3), ("step", t3, t4)):
            sums[k] += (b - a) * 1000.0
    timed = max(1, steps - WARMUP)
    out = {k: v / timed for k, v in sums.items()}
    out["steps"] = timed
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--alone", action="store_true", help="one process, no Tessera (needs --store)")
    ap.add_argument("--store", default=None)
    ap.add_argument("--overlap", action="store_true", help="push the gradients during backward")
    ap.add_argument("--bucket-bytes", type=int, default=1 << 20, help="with --overlap: the smallest piece")
    ap.add_argument("--no-wait", action="store_true", help="step(wait=False): the forward waits for the pulls")
    ap.add_argument("--ddp", action="store_true", help="one rank of DistributedDataParallel (gloo; needs --store)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    net = model(a.hidden)
    if a.alone:
        opt = torch.optim.Adam(net.parameters(), lr=0.001)
        batches = list(tessera.reader("fm", store=a.store).batches(a.batch))
        print(json.dumps(timed_loop(batches, lambda n, loss: opt.step(), net)), flush=True)
        return 0
    if a.ddp:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        rank, size = dist.get_rank(), dist.get_world_size()
        ddp = torch.nn.parallel.DistributedDataParallel(net)
        opt = torch.optim.Adam(ddp.parameters(), lr=0.001)
        batches = list(tessera.reader("fm", store=a.store).batches(a.batch))
        mine = batches[rank::size][:len(batches) // size]  # the same number of steps on every rank
        out = timed_loop(mine, lambda n, loss: opt.step(), ddp)
        if rank == 0:
            print(json.dumps(out), flush=True)
        dist.destroy_process_group()
        return 0
    tessera.init()
    opt = tessera.Optimizer(net, overlap=a.overlap, bucket_bytes=a.bucket_bytes)
    backward = (lambda n, loss: opt.backward(loss, n)) if a.overlap else None
    out = timed_loop(tessera.reader().batches(a.batch), lambda n, loss: opt.step(samples=n, wait=not a.no_wait),
                     net, backward)
    opt.wait()
    path = os.path.join(os.environ["TESSERA_RUN_DIR"], "timeline-%s.json" % os.environ["TESSERA_TRAINER_ID"])
    with open(path + ".tmp", "w") as f:
        json.dump(out, f)
    os.replace(path + ".tmp", path)
    tessera.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
