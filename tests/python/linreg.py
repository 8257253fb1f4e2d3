"""A linear-regression trainer through the Python module, for tests: "x1,x2,x3,x4,y" text records
from the job's tasks, the same parameter ("w": four weights, then the bias) and the same loss
(0.5 * squared error) as examples/c/linreg.c, so C and Python trainers can share a job. Prints
"linreg.py: trainer <id>: <steps> steps, w = ..." at its end. Connection from TESSERA_*."""
import os

import torch

import tessera


class Linear(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(dim + 1))

    def forward(self, x):
        return x @ self.w[:-1] + self.w[-1]


def main():
    torch.set_num_threads(1)
    tessera.init()
    model = Linear(4)
    opt = tessera.Optimizer(model)
    steps = 0
    for batch in tessera.reader().batches(int(os.environ.get("TESSERA_BATCH_SIZE", "32"))):
        rows = torch.tensor([[float(v) for v in (r.decode() if isinstance(r, bytes) else r).split(",")]
                             for r in batch])
        x, y = rows[:, :4], rows[:, 4]
        opt.zero_grad()
        loss = 0.5 * ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step(len(batch), cost=loss.item())
        steps += 1
    print("linreg.py: trainer %s: %d steps, w = %s" % (os.environ.get("TESSERA_TRAINER_ID"), steps,
                                                       " ".join("%.4f" % v for v in model.w.tolist())),
          flush=True)
    tessera.finish()


if __name__ == "__main__":
    main()
