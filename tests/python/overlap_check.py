#!/usr/bin/python3
"""A trainer for LocalTest.PytorchOverlapGivesTheBitsOfOnePushAStep (tests/local/api_test.cc):
an MLP 784-32-32-10 on the job's Fashion-MNIST records, trained with tessera.Optimizer, pushing
its gradients during backward (argv[1] == "overlap", in buckets of argv[2] bytes) or once a step
("whole"); with argv[3] == "nowait", step(wait=False) returns with the pulls on their way and the
next forward waits for them. Writes every parameter's bytes (hex) to
$TESSERA_RUN_DIR/params-<trainer>.json, with the steps and how many forwards started with the
pulls still on their way, and how many requests the pservers read in place in the trainer's dense
memory; the test compares the runs bit for bit. Also checks that the overlap
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
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                              torch.nn.Linear(32, 10))
    tessera.init()
    opt = tessera.Optimizer(net, overlap=overlap, bucket_bytes=bucket)
    steps, in_flight = 0, 0
    for batch in tessera.reader().batches(64):
        pixels, labels, _ = tessera.decode_images(batch)
        x, y = torch.from_numpy(pixels).float().div_(255.0), torch.from_numpy(labels)
        in_flight += opt._in_flight  # the last step's pulls still on their way: forward waits
        loss = F.cross_entropy(net(x), y)
        assert not opt._in_flight, "the forward did not wait for the whole step"
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
    path = os.path.join(os.environ["TESSERA_RUN_DIR"], "params-%s.json" % os.environ["TESSERA_TRAINER_ID"])
    with open(path, "w") as f:
        json.dump(out, f)
    tessera.finish()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
