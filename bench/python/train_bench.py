"""weft's training benchmark: a ResNet-18 training step built from weft.nn layers, hybridized,
against PyTorch's same model and optimizer in the same process.

    python bench/python/train_bench.py [--quick] [--batch N] [--size S] [--threads N]

One step: forward in training mode (BatchNorm batch statistics), softmax cross-entropy averaged
over the batch, backward, and an SGD update with momentum 0.9 and weight decay 1e-4 on every
parameter, then reading the loss (which waits for the step). Both models are ResNet-18 v1 with
1000 classes (11,689,512 parameters), float32, NCHW, the same weights (PyTorch's are copied from
weft's initialization) and the same batch. Milliseconds per step, median of the timed steps.

    compare train_resnet18_b<N> weft=<ms> torch=<ms> ratio=<weft/torch>

--quick (CI): batch 8 at 112x112, one warm-up and two timed steps each; the figure to report is
the default (batch 32 at 224x224, two warm-up and five timed steps). Threads: --threads N
(default: every core) sets PyTorch's intra-op threads; weft uses its engine's defaults (one
worker per core, intra-op threads up to the cores).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np


def weft_step_fn(batch, size, seed=0):
    import weft
    import weft.nn as nn

    model = nn.models.resnet18(classes=1000)
    params = model.init((None, 3, size, size), seed=seed).attach_grad()
    model.hybridize()
    trainer = nn.Trainer(model, nn.SGD(lr=0.01, momentum=0.9, wd=1e-4),
                         nn.SoftmaxCrossEntropyLoss(), params=params)
    rng = np.random.default_rng(1)
    x = weft.array(rng.standard_normal((batch, 3, size, size), dtype=np.float32))
    y = weft.array(rng.integers(0, 1000, size=batch).astype(np.float32))

    def step():
        loss, _ = trainer.step(x, y)
        value = loss.item()
        weft.waitall()  # the backward and the updates too, not only the loss
        return value

    return step, params, model


def torch_model(tnn):
    class Block(tnn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = tnn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = tnn.BatchNorm2d(cout)
            self.c2 = tnn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = tnn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride, 0, bias=False),
                                           tnn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.b2(self.c2(tnn.functional.relu(self.b1(self.c1(x)))))
            return tnn.functional.relu(y + (x if self.down is None else self.down(x)))

    layers = [tnn.Conv2d(3, 64, 7, 2, 3, bias=False), tnn.BatchNorm2d(64), tnn.ReLU(),
              tnn.MaxPool2d(3, 2, 1)]
    cin = 64
    for i, c in enumerate((64, 128, 256, 512)):
        for j in range(2):
            layers.append(Block(cin, c, 2 if i > 0 and j == 0 else 1))
            cin = c
    layers += [tnn.AdaptiveAvgPool2d(1), tnn.Flatten(), tnn.Linear(512, 1000)]
    return tnn.Sequential(*layers)


def torch_step_fn(batch, size, weft_params):
    import torch

    model = torch_model(torch.nn)
    # The same weights: weft's parameters in creation order match PyTorch's module order.
    w = [v.asnumpy() for k, v in weft_params.items() if k not in weft_params.aux_names]
    tp = list(model.parameters())
    if len(w) != len(tp) or any(a.shape != tuple(b.shape) for a, b in zip(w, tp)):
        raise SystemExit("train bench: the PyTorch model's parameters do not line up with weft's")
    with torch.no_grad():
        for a, b in zip(w, tp):
            b.copy_(torch.from_numpy(a))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal((batch, 3, size, size), dtype=np.float32))
    y = torch.from_numpy(rng.integers(0, 1000, size=batch).astype(np.int64))
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def timed_pair(step_a, step_b, warmup, reps):
    """Medians of both steps, timed alternately (a, b, a, b, ...) so that a slow spell of the
    machine falls on both."""
    losses_a = [step_a() for _ in range(warmup)]
    losses_b = [step_b() for _ in range(warmup)]
    times_a, times_b = [], []
    for _ in range(reps):
        for step, times, losses in ((step_a, times_a, losses_a), (step_b, times_b, losses_b)):
            t0 = time.perf_counter()
            losses.append(step())
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times_a), losses_a, statistics.median(times_b), losses_b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--batch", type=int)
    ap.add_argument("--size", type=int)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    batch = args.batch or (8 if args.quick else 32)
    size = args.size or (112 if args.quick else 224)
    warmup, reps = (1, 2) if args.quick else (2, 5)

    import torch
    torch.set_num_threads(args.threads)
    import weft

    print(f"train bench: ResNet-18, batch {batch}, {size}x{size}, SGD momentum 0.9; weft "
          f"{weft.__version__}, PyTorch {torch.__version__} ({args.threads} threads)")
    weft_step, params, _ = weft_step_fn(batch, size)
    torch_step = torch_step_fn(batch, size, params)
    w_ms, w_losses, t_ms, t_losses = timed_pair(weft_step, torch_step, warmup, reps)
    # The first losses are on the same weights and batch: they agree unless a model is wrong.
    print(f"first-step loss: weft {w_losses[0]:.5f} torch {t_losses[0]:.5f}")
    if not np.isfinite(w_losses).all() or abs(w_losses[0] - t_losses[0]) > 1e-2 * abs(
            t_losses[0]):
        print("train bench: weft's first-step loss differs from PyTorch's", file=sys.stderr)
        return 1
    print(f"compare train_resnet18_b{batch} weft={w_ms:.1f} torch={t_ms:.1f} "
          f"ratio={w_ms / t_ms:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
