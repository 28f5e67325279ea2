#!/usr/bin/env python3
"""Trains a small CNN built from weft.nn layers, hybridized, and exports it for MXNet.

The data is synthetic so that the example needs no download: 16x16 single-channel images, each
holding one short bar (horizontal, vertical, or one of the two diagonals: four classes) at a
random place, on noise. A linear model cannot tell the orientations apart wherever the bar is;
two convolutions and pooling can.

    model = nn.Sequential(nn.Conv2D(16, 3, padding=1), nn.BatchNorm(), nn.ReLU(), ...)
    params = model.init((None, 1, 16, 16), seed=0)      # shapes inferred, batch deferred
    model.hybridize()                                    # one bound graph per input shape
    trainer = nn.Trainer(model, nn.Adam(lr=0.01), nn.SoftmaxCrossEntropyLoss(), params)
    trainer.fit(nn.batches(x, y, 64), epochs=3, validation=...)
    model.export("cnn", params)                          # cnn-symbol.json, cnn-0000.params

    python examples/python/cnn_layers.py [--epochs 3] [--samples 4096] [--out DIR]
    [--imperative] [--quiet]

Prints the model summary, a progress bar per epoch and the held-out accuracy (above 0.95 after
three epochs), and writes the MXNet checkpoint to DIR.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np


def make_data(n, seed):
    """n images (n, 1, 16, 16) and their labels 0..3 (bar orientation)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 0.35, size=(n, 1, 16, 16)).astype(np.float32)
    y = rng.integers(0, 4, size=n)
    steps = {0: (0, 1), 1: (1, 0), 2: (1, 1), 3: (1, -1)}
    for i in range(n):
        dr, dc = steps[int(y[i])]
        r, c = rng.integers(3, 13, size=2)
        for k in range(-2, 3):
            x[i, 0, r + k * dr, c + k * dc] += 1.0
    return x, y.astype(np.float32)


def build():
    import weft.nn as nn
    return nn.Sequential(
        nn.Conv2D(16, 3, padding=1), nn.BatchNorm(), nn.ReLU(), nn.MaxPool2D(2),
        nn.Conv2D(32, 3, padding=1), nn.BatchNorm(), nn.ReLU(),
        nn.GlobalMaxPool2D(), nn.Flatten(), nn.Dense(4))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--out", default=".")
    ap.add_argument("--imperative", action="store_true", help="do not hybridize")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)

    import weft.nn as nn

    x, y = make_data(args.samples, seed=1)
    vx, vy = make_data(1024, seed=2)
    model = build()
    params = model.init((None, 1, 16, 16), seed=0)
    print(model.summary((None, 1, 16, 16)))
    if not args.imperative:
        model.hybridize()
    trainer = nn.Trainer(model, nn.Adam(lr=0.01), nn.SoftmaxCrossEntropyLoss(), params=params)
    history = trainer.fit(nn.batches(x, y, args.batch, seed=0), epochs=args.epochs,
                          validation=nn.batches(vx, vy, 256, shuffle=False),
                          progress=not args.quiet)
    acc = history["val_accuracy"][-1]
    print(f"held-out accuracy {acc:.4f}")
    os.makedirs(args.out, exist_ok=True)
    sym_path, params_path = model.export(os.path.join(args.out, "cnn"), params)
    print(f"exported {sym_path} and {params_path}")
    return 0 if acc > 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
