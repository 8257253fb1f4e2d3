#!/usr/bin/python3
"""Fashion-MNIST with PyTorch, trained through Tessera's parameter servers.

Runs as-is as every trainer of a job:

    tessera upload --store S --dataset fm --format idx \\
        --images /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz \\
        --labels /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz
    (the same for the t10k files as fm-test)
    tessera local --store S --dataset fm --eval-dataset fm-test --pservers 2 --trainers 2 \\
        --passes 2 --trainer-cmd "python3 examples/fashion_mnist/train.py"

Each trainer reads the tasks the master hands it, computes gradients with torch, and lets the
pservers apply them (the job's optimizer, or --optimizer). After every pass the lowest-numbered
live trainer evaluates on the held-out set and reports accuracy to the job.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

import tessera


def to_tensors(batch):
    pixels, labels, _ = tessera.decode_images(batch)
    return torch.from_numpy(pixels).float().div_(255.0), torch.from_numpy(labels)


class Net(torch.nn.Module):
    """A small convolutional network (or, with --mlp, one hidden layer)."""

    def __init__(self, mlp, hidden):
        super().__init__()
        self.mlp = mlp
        if mlp:
            self.fc1 = torch.nn.Linear(784, hidden)
            self.fc2 = torch.nn.Linear(hidden, 10)
        else:
            self.conv1 = torch.nn.Conv2d(1, 8, 5, padding=2)
            self.conv2 = torch.nn.Conv2d(8, 16, 5, padding=2)
            self.fc1 = torch.nn.Linear(16 * 7 * 7, hidden)
            self.fc2 = torch.nn.Linear(hidden, 10)

    def forward(self, x):
        if not self.mlp:
            x = x.view(-1, 1, 28, 28)
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = x.flatten(1)
        return self.fc2(F.relu(self.fc1(x)))


def evaluate(model, dataset, dtype, store=None):
    correct = total = 0
    loss = 0.0
    with torch.no_grad():
        for batch in tessera.reader(dataset, store).batches(1000):
            x, y = to_tensors(batch)
            out = model(x.to(dtype)).float()
            loss += F.cross_entropy(out, y, reduction="sum").item()
            correct += (out.argmax(1) == y).sum().item()
            total += len(y)
    return {"accuracy": correct / total, "loss": loss / total}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch-size", type=int, default=int(os.environ.get("TESSERA_BATCH_SIZE", "64")))
    ap.add_argument("--eval-dataset", default=os.environ.get("TESSERA_EVAL_DATASET") or None,
                    help="held-out data set to evaluate after each pass (default: TESSERA_EVAL_DATASET)")
    ap.add_argument("--optimizer", default=None, help="pserver-side optimizer, e.g. adam:lr=0.001 (default: the job's)")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--mlp", action="store_true", help="one hidden layer instead of the CNN")
    ap.add_argument("--save", default=None, help="also save the trained model (.tsm) here")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64", "bfloat16", "float16"],
                    help="the model's parameters and activations (the pservers keep float32); float16 "
                         "needs a GPU for most layers")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)

    torch.manual_seed(0)
    # Threads: `tessera local` and `tessera launch` give this trainer its share of the cores in
    # OMP_NUM_THREADS and OPENBLAS_NUM_THREADS, which torch and OpenBLAS read as they load.
    tessera.init()
    model = Net(args.mlp, args.hidden).to(dtype)
    opt = tessera.Optimizer(model, optimizer=args.optimizer)

    def on_pass_end(info):
        if args.eval_dataset and tessera.is_evaluator():
            m = evaluate(model, args.eval_dataset, dtype)
            tessera.report(metrics=m, pass_=info["pass"])
            print("pass %d: accuracy %.4f loss %.4f (step %d)" % (info["pass"], m["accuracy"], m["loss"],
                                                                  info["step"]), flush=True)

    tessera.on("pass_end", on_pass_end)
    for batch in tessera.reader().batches(args.batch_size):
        x, y = to_tensors(batch)
        loss = F.cross_entropy(model(x.to(dtype)).float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step(samples=len(batch), cost=loss.item())
    save_and_finish(args.save)
    return 0


def save_and_finish(path):
    """Saves the trained model to `path` (if given, from one trainer) and ends this trainer."""
    if path and tessera.is_evaluator():
        tessera.save_model(path)
        print("model saved to", path, flush=True)
    tessera.finish()


if __name__ == "__main__":
    sys.exit(main())
