#!/usr/bin/python3
"""A CNN for Fashion-MNIST that reaches 91% test accuracy, trained through Tessera or in one process.

Through Tessera (every trainer of a job runs it as-is; the pservers apply the job's optimizer):

    tessera local --store S --dataset fm --eval-dataset fm-test --pservers 2 --trainers 2 \\
        --mode sync --passes 15 --optimizer adam:lr=0.001 \\
        --trainer-cmd "/usr/bin/python3 examples/fashion_mnist/cnn.py"

The same model in one process, for comparison (torch's own Adam, the same batch per step as the
job's 2 trainers of 64 together):

    /usr/bin/python3 examples/fashion_mnist/cnn.py --one-process --store S --passes 15 --batch-size 128

(Upload fm and fm-test first, as examples/fashion_mnist/train.py says.) Both print the test
accuracy and the time after every pass. The network: three 3x3 convolutions (16, 32, 64
channels) with batch normalization, two max-pools, a hidden layer of 128 with dropout; 0.43 M
parameters. Batch normalization's running statistics are each trainer's own (they are buffers,
not parameters); the evaluating trainer uses its own.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

import tessera
from train import evaluate, save_and_finish, to_tensors


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = torch.nn.BatchNorm2d(32)
        self.conv3 = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.bn3 = torch.nn.BatchNorm2d(64)
        self.fc1 = torch.nn.Linear(64 * 7 * 7, 128)
        self.drop = torch.nn.Dropout(0.3)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = x.view(-1, 1, 28, 28)
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)  # 14 x 14
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)  # 7 x 7
        x = F.relu(self.bn3(self.conv3(x)))
        return self.fc2(self.drop(F.relu(self.fc1(x.flatten(1)))))


def augment(x):
    """Each image mirrored left to right at random, and shifted by up to 2 pixels each way."""
    x = x.view(-1, 1, 28, 28)
    flip = torch.rand(x.shape[0]) < 0.5
    x = torch.where(flip.view(-1, 1, 1, 1), x.flip(3), x)
    padded = F.pad(x, (2, 2, 2, 2))
    out = torch.empty_like(x)
    dy, dx = torch.randint(0, 5, (2, x.shape[0])).tolist()
    for i in range(x.shape[0]):
        out[i] = padded[i, :, dy[i]:dy[i] + 28, dx[i]:dx[i] + 28]
    return out


def loss_of(model, batch):
    x, y = to_tensors(batch)
    return F.cross_entropy(model(augment(x)), y)


def one_process(args):
    """The same model and data without Tessera: torch's Adam, one process."""
    if not args.store:
        sys.exit("cnn.py: --one-process needs --store (where fm and fm-test were uploaded)")
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    start = time.monotonic()
    for p in range(1, args.passes + 1):
        model.train()
        for batch in tessera.reader(args.dataset, args.store).batches(args.batch_size):
            loss = loss_of(model, batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()
        m = evaluate(model, args.eval_dataset, torch.float32, args.store)
        print("pass %d: accuracy %.4f loss %.4f (%.1f s)" % (p, m["accuracy"], m["loss"], time.monotonic() - start),
              flush=True)
    return 0


def through_tessera(args):
    tessera.init()
    model = Net()
    opt = tessera.Optimizer(model, optimizer=args.optimizer)
    start = time.monotonic()

    def on_pass_end(info):
        if args.eval_dataset and tessera.is_evaluator():
            model.eval()
            m = evaluate(model, args.eval_dataset, torch.float32)
            model.train()
            tessera.report(metrics=m, pass_=info["pass"])
            print("pass %d: accuracy %.4f loss %.4f (step %d, %.1f s)" % (info["pass"], m["accuracy"], m["loss"],
                                                                         info["step"], time.monotonic() - start),
                  flush=True)

    tessera.on("pass_end", on_pass_end)
    model.train()
    for batch in tessera.reader().batches(args.batch_size):
        loss = loss_of(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step(samples=len(batch), cost=loss.item())
    save_and_finish(args.save)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch-size", type=int, default=int(os.environ.get("TESSERA_BATCH_SIZE", "64")))
    ap.add_argument("--eval-dataset", default=os.environ.get("TESSERA_EVAL_DATASET") or None,
                    help="held-out data set to evaluate after each pass (default: TESSERA_EVAL_DATASET; "
                         "fm-test with --one-process)")
    ap.add_argument("--optimizer", default=None, help="pserver-side optimizer, e.g. adam:lr=0.001 (default: the job's)")
    ap.add_argument("--save", default=None, help="also save the trained model (.tsm) here")
    ap.add_argument("--one-process", action="store_true", help="train without Tessera, for comparison")
    ap.add_argument("--store", default=None, help="--one-process: the data store")
    ap.add_argument("--dataset", default="fm", help="--one-process: the training set (default fm)")
    ap.add_argument("--passes", type=int, default=15, help="--one-process: passes over the data (default 15)")
    ap.add_argument("--lr", type=float, default=0.001, help="--one-process: Adam's learning rate (default 0.001)")
    args = ap.parse_args()
    if args.batch_size <= 0:
        ap.error("--batch-size must be positive")
    torch.manual_seed(0)
    try:
        if args.one_process:
            args.eval_dataset = args.eval_dataset or "fm-test"
            return one_process(args)
        return through_tessera(args)
    except tessera.Error as e:
        hint = ""
        if "TESSERA_ETCD" in str(e):
            hint = ("\n(it runs as a job's trainer: tessera local ... --trainer-cmd \"/usr/bin/python3 %s\"; "
                    "or alone with --one-process --store S)" % sys.argv[0])
        sys.exit("cnn.py: %s%s" % (e, hint))


if __name__ == "__main__":
    sys.exit(main())
