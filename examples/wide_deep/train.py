#!/usr/bin/python3
"""Wide & Deep click-through-rate model with PyTorch, trained through Tessera's parameter servers.

The wide part is a sparse logistic regression (one weight per feature id, FTRL); the deep part
embeds every feature id (Adagrad), sums a record's embeddings weighted by the feature values and
feeds them to a small dense MLP (the job's optimizer). Both tables and the MLP are pushed in one
step request. Runs as-is as every trainer of a job:

    tessera gen-ctr --train-out train.svm --eval-out eval.svm --rows 100000
    tessera upload --store S --dataset ctr --format libsvm --input train.svm
    tessera upload --store S --dataset ctr-eval --format libsvm --input eval.svm
    tessera local --store S --dataset ctr --eval-dataset ctr-eval --pservers 2 --trainers 2 \\
        --passes 2 --optimizer adam:lr=0.002 --trainer-cmd "python3 examples/wide_deep/train.py"

After every pass the lowest-numbered live trainer evaluates on the held-out set and reports AUC
and log-loss to the job.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

import tessera


def to_tensors(batch):
    ids, values, offsets, labels = tessera.decode_examples(batch)
    return (torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(values), torch.from_numpy(offsets),
            (torch.from_numpy(labels) > 0).float())


class WideDeep(torch.nn.Module):
    def __init__(self, dim, hidden, wide_optimizer, deep_optimizer, limits):
        super().__init__()
        self.dim = dim
        self.wide = tessera.Embedding("wide", 1, init="zeros", optimizer=wide_optimizer, limits=limits)
        self.deep = tessera.Embedding("deep", dim, init="uniform:-0.05,0.05", optimizer=deep_optimizer,
                                      limits=limits)
        self.fc1 = torch.nn.Linear(dim, hidden)
        self.fc2 = torch.nn.Linear(hidden, 1)

    def forward(self, ids, values, offsets):
        n = len(offsets) - 1
        record = torch.repeat_interleave(torch.arange(n), offsets[1:] - offsets[:-1])
        # Each distinct id is pulled (and its gradient pushed) once per batch.
        unique, inverse = torch.unique(ids, return_inverse=True)
        v = values.unsqueeze(1)
        wide = torch.zeros(n, 1).index_add_(0, record, self.wide(unique)[inverse] * v)
        pooled = torch.zeros(n, self.dim).index_add_(0, record, self.deep(unique)[inverse] * v)
        return (wide + self.fc2(F.relu(self.fc1(pooled)))).squeeze(1)


def auc(scores, labels):
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    s = scores[order]
    i = 0
    while i < len(s):  # tied scores share their mean rank
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = labels.sum()
    neg = len(labels) - pos
    return float((ranks[labels == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def evaluate(model, dataset):
    scores, labels, loss = [], [], 0.0
    with torch.no_grad():
        for batch in tessera.reader(dataset).batches(2000):
            ids, values, offsets, y = to_tensors(batch)
            logits = model(ids, values, offsets)
            loss += F.binary_cross_entropy_with_logits(logits, y, reduction="sum").item()
            scores.append(torch.sigmoid(logits).numpy())
            labels.append(y.numpy())
    scores, labels = np.concatenate(scores), np.concatenate(labels)
    return {"auc": auc(scores, labels), "logloss": loss / len(labels)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch-size", type=int, default=int(os.environ.get("TESSERA_BATCH_SIZE", "64")))
    ap.add_argument("--eval-dataset", default=os.environ.get("TESSERA_EVAL_DATASET") or None,
                    help="held-out data set to evaluate after each pass (default: TESSERA_EVAL_DATASET)")
    ap.add_argument("--dim", type=int, default=8, help="embedding size of the deep part")
    ap.add_argument("--hidden", type=int, default=32, help="hidden units of the MLP")
    ap.add_argument("--wide-optimizer", default="ftrl:alpha=0.1,beta=0.01,l1=0.0003")
    ap.add_argument("--deep-optimizer", default="adagrad:lr=0.05")
    ap.add_argument("--limits", default="", help="both tables' limits, e.g. admit=2,budget=64MiB (docs/sparse.md)")
    args = ap.parse_args()

    torch.manual_seed(0)
    # Threads: `tessera local` and `tessera launch` give this trainer its share of the cores in
    # OMP_NUM_THREADS and OPENBLAS_NUM_THREADS, which torch and OpenBLAS read as they load.
    tessera.init()
    model = WideDeep(args.dim, args.hidden, args.wide_optimizer, args.deep_optimizer, args.limits)
    opt = tessera.Optimizer(model)  # the MLP takes the job's optimizer

    def on_pass_end(info):
        if args.eval_dataset and tessera.is_evaluator():
            m = evaluate(model, args.eval_dataset)
            tessera.report(metrics=m, pass_=info["pass"])
            print("pass %d: auc %.4f logloss %.4f (step %d)" % (info["pass"], m["auc"], m["logloss"], info["step"]),
                  flush=True)

    tessera.on("pass_end", on_pass_end)
    for batch in tessera.reader().batches(args.batch_size):
        ids, values, offsets, y = to_tensors(batch)
        loss = F.binary_cross_entropy_with_logits(model(ids, values, offsets), y)
        opt.zero_grad()
        loss.backward()
        opt.step(samples=len(batch), cost=loss.item())
    tessera.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
