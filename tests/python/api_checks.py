#!/usr/bin/python3
"""A trainer for the Python API test (tests/local/api_test.cc runs it under `tessera local`).

The data set holds lines "ID LABEL": 300 ids, each 20 times, each id with one of 5 labels. The model is a sparse
tessera.Embedding (one row of 5 logits per id) plus a dense bias, trained with cross-entropy:
it can reach 100% only if sparse lookups, sparse gradient pushes and dense pushes all work.
Along the way it checks bad input is refused with clear errors, counts events, and writes what
it saw to $TESSERA_RUN_DIR/api-checks-<trainer>.json (the C++ test asserts on it), with the
math libraries' thread settings `tessera local` gave it. Every other step is step(wait=False):
its batch_end callbacks must still see the step settled. Any failed check exits non-zero.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

import tessera

IDS, CLASSES = 300, 5


def expect_error(fn, kind, words):
    try:
        fn()
    except kind as e:
        msg = str(e)
        for w in words:
            assert w in msg, "error %r does not mention %r" % (msg, w)
        return msg
    raise AssertionError("no %s raised" % kind.__name__)


class _IntModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n = torch.nn.Parameter(torch.zeros(3, dtype=torch.int32), requires_grad=False)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # limits: the table path with admission and eviction (every id is pushed often: none goes)
        self.emb = tessera.Embedding("emb", CLASSES, init="zeros", optimizer="sgd:lr=10", limits="evict_after=100000")
        self.bias = torch.nn.Parameter(torch.zeros(CLASSES))

    def forward(self, ids):
        return self.emb(ids) + self.bias


def decode(batch):
    pairs = [r.split() for r in batch]
    return torch.tensor([int(a) for a, _ in pairs]), torch.tensor([int(b) for _, b in pairs])


def main():
    torch_threads = torch.get_num_threads()  # from OMP_NUM_THREADS, before this script sets its own
    torch.set_num_threads(1)
    errors = {}
    errors["no_init"] = expect_error(lambda: tessera.session(), tessera.Error, ["tessera.init()"])
    errors["bad_transport"] = expect_error(lambda: tessera._tessera.Session(transport="udp"), tessera.Error,
                                           ["'udp'", "grpc, tcp, shm or auto"])
    s = tessera.init()
    errors["double_init"] = expect_error(lambda: tessera.init(), tessera.Error, ["already"])
    errors["bad_event"] = expect_error(lambda: tessera.on("nope", print), ValueError, ["nope", "batch_end"])
    errors["float64"] = expect_error(lambda: s.add_dense("x", np.zeros(4)), TypeError, ["'x'", "float32"])
    errors["strided"] = expect_error(lambda: s.add_dense("y", np.zeros((4, 4), np.float32)[:, 1]), ValueError,
                                     ["'y'", "contiguous"])
    errors["bad_optimizer"] = expect_error(lambda: s.add_dense("z", np.zeros(4, np.float32), "adamw"), tessera.Error,
                                           ["adamw"])
    errors["not_an_example"] = expect_error(lambda: tessera.decode_examples([b"\xff\xff\xff"]), ValueError,
                                            ["record 0", "tessera.data.Example"])
    errors["not_numbers"] = expect_error(lambda: tessera.decode_text([b"1,2,3", b"4,five,6"]), ValueError,
                                         ["record 1", "3 comma-separated numbers", "five"])
    errors["not_csv"] = expect_error(lambda: tessera.decode_csv([b"\xff\xff\xff"]), ValueError,
                                     ["record 0", "tessera.data.Example"])
    errors["integer_parameter"] = expect_error(
        lambda: tessera.Optimizer(_IntModel()), TypeError,
        ["'n'", "floating point"])
    errors["bad_limits"] = expect_error(lambda: tessera.Embedding("w", 4, limits="budgte=1M"), tessera.Error,
                                        ["budgte", "admit, admit_prob, evict_after, budget"])

    model = Model()
    opt = tessera.Optimizer(model, optimizer="sgd:lr=0.5")
    errors["undeclared_table"] = expect_error(
        lambda: s.sparse_pull("nope", np.zeros(1, np.uint64), np.zeros(5, np.float32)), tessera.Error, ["nope"])
    errors["bad_samples"] = expect_error(lambda: opt.step(samples=0), ValueError, ["samples"])

    events = {"batch_end": 0, "pass_end": [], "whole_reads": []}
    tessera.on("batch_end", lambda info: events.__setitem__("batch_end", events["batch_end"] + 1))
    unsettled = []  # steps whose callbacks ran with the pulls still on their way
    tessera.on("batch_end", lambda info: opt._in_flight and unsettled.append(info["step"]))
    tessera.on("pass_end", lambda info: events["pass_end"].append(info["pass"]))

    def evaluate_on_training_data(info):
        # Naming the job's own data set reads all of it (evaluation on the training data), and
        # the dispatched reader cannot be used from inside a callback.
        events["whole_reads"].append(sum(len(b) for b in tessera.reader(os.environ["TESSERA_DATASET"]).batches(1000)))
        if "reader_in_callback" not in errors:
            errors["reader_in_callback"] = expect_error(lambda: next(iter(tessera.reader().batches(8))),
                                                        tessera.Error, ["pass_end", "reader()"])
    tessera.on("pass_end", evaluate_on_training_data)
    records = 0
    for batch in tessera.reader().batches(32):
        ids, labels = decode(batch)
        loss = F.cross_entropy(model(ids), labels)
        opt.zero_grad()
        loss.backward()
        steps = records // 32
        if steps == 4:
            model.bias.grad[1] = float("nan")  # dropped (the job's policy: skip), and step() says so
        took = opt.step(samples=len(batch), cost=loss.item(), wait=steps % 2 == 0)
        assert took in (True, False) if steps % 2 == 0 else took is None, took
        assert took is False or steps != 4, "a step whose gradient held NaN returned %r" % took
        records += len(batch)

    assert not unsettled, "batch_end ran before these steps' pulls landed: %s" % unsettled[:10]

    # Every id's learned row, read back from the pservers.
    truth = [(i * 7 + 3) % CLASSES for i in range(IDS)]
    with torch.no_grad():
        logits = model(torch.arange(IDS))
    accuracy = float((logits.argmax(1) == torch.tensor(truth)).float().mean())
    out = {"trainer": s.trainer_id, "records": records, "batch_end": events["batch_end"],
           "pass_end": events["pass_end"], "whole_reads": events["whole_reads"], "accuracy": accuracy, "errors": errors, "step": s.step,
           "threads": {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
           "torch_threads": torch_threads}
    if tessera.is_evaluator():
        tessera.report(metrics={"accuracy": accuracy})
        path = os.path.join(os.environ["TESSERA_RUN_DIR"], "saved.tsm")
        tessera.save_model(path)
        saved = tessera.load_model(path)
        keys, rows = saved["emb"]
        out["saved_rows"] = int(len(keys))
        out["saved_bias_matches"] = bool(np.allclose(saved["bias"], model.bias.detach().numpy()))
        check = Model.__new__(Model)
        torch.nn.Module.__init__(check)
        check.bias = torch.nn.Parameter(torch.zeros(CLASSES))
        tessera.load_into(check, path)
        out["load_into_matches"] = bool(torch.equal(check.bias, model.bias))
    with open(os.path.join(os.environ["TESSERA_RUN_DIR"], "api-checks-%s.json" % s.trainer_id), "w") as f:
        json.dump(out, f)
    tessera.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
