"""A linear-regression trainer through the Python module, for tests: "x1,x2,x3,x4,y" text records
from the job's tasks, the same parameter ("w": four weights, then the bias) and the same loss
(0.5 * squared error) as examples/c/linreg.c, so C and Python trainers can share a job. Prints
"linreg.py: trainer <id>: <steps> steps, w = ..." at its end. Connection from TESSERA_*.

--dtype D keeps the model in D (float16, bfloat16, float32, float64: an elementwise model, which
torch can run in each of them on a CPU) and checks, after every step, that the parameter is
still a D tensor holding the pulled values; --nowait steps with wait=False. --format csv reads a
data set uploaded with --format csv (the label its last column) through tessera.decode_csv."""
import argparse
import os

import torch

import tessera


class Linear(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(dim + 1))

    def forward(self, x):
        return (x * self.w[:-1]).sum(-1) + self.w[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--nowait", action="store_true")
    ap.add_argument("--format", default="text", choices=["text", "csv"])
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    torch.set_num_threads(1)
    tessera.init()
    model = Linear(4).to(dtype)
    opt = tessera.Optimizer(model)
    steps = 0
    for batch in tessera.reader().batches(int(os.environ.get("TESSERA_BATCH_SIZE", "32"))):
        if args.format == "csv":
            features, labels = tessera.decode_csv(batch)
            x, y = torch.from_numpy(features).to(dtype), torch.from_numpy(labels)
        else:
            rows = torch.from_numpy(tessera.decode_text(batch, columns=5))
            x, y = rows[:, :4].to(dtype), rows[:, 4]
        opt.zero_grad()
        loss = 0.5 * ((model(x).float() - y) ** 2).mean()
        loss.backward()
        opt.step(len(batch), cost=loss.item(), wait=not args.nowait)
        steps += 1
        if not args.nowait:
            staged = opt._staged.get("w")
            assert model.w.dtype == dtype, "the parameter became %s" % model.w.dtype
            assert staged is None or torch.equal(model.w.data, staged.to(dtype)), "the pulled values were not copied back"
    opt.wait()
    print("linreg.py: trainer %s: %d steps, dtype %s, w = %s" % (os.environ.get("TESSERA_TRAINER_ID"), steps, model.w.dtype,
                                                                 " ".join("%.4f" % v for v in model.w.tolist())),
          flush=True)
    tessera.finish()


if __name__ == "__main__":
    main()
