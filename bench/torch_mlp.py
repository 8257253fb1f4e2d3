#!/usr/bin/python3
"""PyTorch baselines for mlp_bench: the same 784-H-10 ReLU classifier, batch size and Adam, one
pass over Fashion-MNIST, in one process and with DistributedDataParallel (gloo, 2 processes on
127.0.0.1). One torch thread per process (the built-in model's Eigen code is single-threaded).
Prints Markdown table rows."""
import argparse
import os
import socket
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

import tessera


def load(store):
    batches = list(tessera.reader("fm", store=store).batches(60000))
    px, labels, _ = tessera.decode_images(batches[0])
    return torch.from_numpy(px).float().div_(255.0), torch.from_numpy(labels)


def model(hidden):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10))


def train(net, x, y, batch):
    opt = torch.optim.Adam(net.parameters(), lr=0.001)
    start = time.perf_counter()
    for i in range(0, len(y), batch):
        loss = F.cross_entropy(net(x[i:i + batch]), y[i:i + batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return time.perf_counter() - start


def ddp_worker(rank, world, port, x, y, hidden, batch, out):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    net = torch.nn.parallel.DistributedDataParallel(model(hidden))
    part = slice(rank, len(y), world)
    dist.barrier()
    out[rank] = train(net, x[part].contiguous(), y[part].contiguous(), batch)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    x, y = load(a.store)
    torch.set_num_threads(1)
    secs = train(model(a.hidden), x, y, a.batch)
    print("| PyTorch %s, one process, 1 thread | %.0f | | | | |" % (torch.__version__, len(y) / secs), flush=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = mp.Manager().dict()
    mp.spawn(ddp_worker, args=(2, port, x, y, a.hidden, a.batch, out), nprocs=2, join=True)
    print("| PyTorch DDP (gloo), 2 processes, batch %d each | %.0f | | | | |" % (a.batch, len(y) / max(out.values())),
          flush=True)


if __name__ == "__main__":
    main()
