#!/usr/bin/python3
"""A trainer for LocalTest.PytorchOverlapGivesTheBitsOfOnePushAStep (tests/local/api_test.cc):
an MLP 784-H-H-10 (H = argv[4], default 32) on the job's Fashion-MNIST records, trained with tessera.Optimizer, pushing
its gradients during backward (argv[1] == "overlap", in buckets of argv[2] bytes) or once a step
("whole"); with argv[3] == "nowait", step(wait=False) returns with the pulls on their way and the
next forward waits for them. Writes every parameter's bytes (hex) to
$TESSERA_RUN_DIR/params-<trainer>.json, with the steps and how many forwards started with the
pulls still on their way, how many requests the pservers read in place in the trainer's dense
memory, and how many forwards began on values written in place while the step went on; the test
compares the runs bit for bit. Also checks that the overlap
API refuses misuse."""
import json
import os
import sys

import torch
import torch.nn.functional as F

import tessera


def expect_error(fn, words):
    try:
        fn()
    except tessera.Error as e:
        for w in words:
            assert w in str(e), "error %r does not mention %r" % (str(e), w)
        return
    raise AssertionError("no tessera.Error raised")


def main():
    overlap = sys.argv[1] == "overlap"
    bucket = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 20
    wait = not (len(sys.argv) > 3 and sys.argv[3] == "nowait")
    hidden = int(sys.argv[4]) if len(sys.argv) > 4 else 32
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                              torch.nn.ReLU(), torch.nn.Linear(hidden, 10))
    tessera.init()
    opt = tessera.Optimizer(net, overlap=overlap, bucket_bytes=bucket)
    steps, in_flight = 0, 0
    for batch in tessera.reader().batches(64):
        pixels, labels, _ = tessera.decode_images(batch)
        x, y = torch.from_numpy(pixels).float().div_(255.0), torch.from_numpy(labels)
        in_flight += opt._in_flight  # the last step's pulls still on their way: forward waits
        loss = F.cross_entropy(net(x), y)
        # In pieces the last module's forward waits for the whole step; one push a step may still
        # be on its way once every module has its values (written in place as they came).
        assert not opt._in_flight or not (overlap or wait), "the forward did not wait for the whole step"
        opt.zero_grad()
        if overlap:
            if steps == 0:
                # Misuse is refused, saying what to do, and changes nothing.
                expect_error(lambda: opt.step(len(y)), ["opt.backward(loss, samples) before step()"])
                expect_error(lambda: F.cross_entropy(net(x), y).backward(), ["opt.backward(loss, samples)"])
                opt.zero_grad()
            opt.backward(loss, len(y))
        else:
            loss.backward()
            if steps == 0:
                expect_error(lambda: opt.backward(loss, len(y)), ["overlap=True"])
        if wait:
            assert opt.step(len(y), float(loss)), "a step went on without this trainer"
        else:
            assert opt.step(len(y), float(loss), wait=False) is None
            if steps == 0:
                assert opt.wait() is True and opt.wait() is True, "a step went on without this trainer"
        steps += 1
    assert opt.wait() is not False  # the last step's pulls, before reading the parameters
    out = {name: p.detach().numpy().tobytes().hex() for name, p in net.named_parameters()}
    out["steps"] = steps
    out["in_flight"] = in_flight
    out["in_place"] = tessera._tessera.in_place()[0]  # requests read in the trainer's dense memory
    out["ahead"] = tessera.session().steps_ahead()  # forwards begun on values written in place
    path = os.path.join(os.environ["TESSERA_RUN_DIR"], "params-%s.json" % os.environ["TESSERA_TRAINER_ID"])
    with open(path, "w") as f:
        json.dump(out, f)
    tessera.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
