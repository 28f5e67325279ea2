#!/usr/bin/env python3
"""Trains an MNIST-shaped MLP (784-512-512-10) imperatively with weft arrays and weft.autograd.

The data is synthetic so that the example needs no download: ten classes, each a Gaussian blob
around its own random 28x28 "template" image, with noise much larger than the templates differ,
so that a linear model does not separate them at once and accuracy climbs over the epochs (chance
is 10 %). Training is plain minibatch SGD written out by hand:

    with weft.autograd.record():
        logits = forward(x)
        loss = -(weft.op.log_softmax(logits) * onehot).sum() / batch
    loss.backward()
    for w in params:
        w -= lr * w.grad          # in place, pushed onto the engine like every other operation

Every call returns before its kernel runs; the loop only waits when it reads a loss (every few
steps, for the progress bar) or the test accuracy.

    python examples/python/mlp_train.py [--epochs 3] [--batch 64] [--lr 0.05] [--out DIR]

Writes DIR/mlp_loss.png (the loss per step) when matplotlib is installed.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import weft

NUM_CLASSES = 10
IMAGE = 28 * 28


def make_data(n, templates, noise, rng):
    """`n` samples: a class label each, and its template plus Gaussian noise (float32)."""
    labels = rng.integers(0, NUM_CLASSES, size=n)
    x = templates[labels] + rng.normal(0.0, noise, size=(n, IMAGE))
    return x.astype(np.float32), labels.astype(np.int64)


def one_hot(labels):
    """(n, 10) float32 rows with a 1 at each label."""
    out = np.zeros((len(labels), NUM_CLASSES), dtype=np.float32)
    out[np.arange(len(labels)), labels] = 1.0
    return out


def nearest_template_accuracy(x, labels, templates):
    """Accuracy of the classifier that knows the true templates (nearest one wins): about the
    best any model can do on this data, computed with NumPy alone."""
    d = ((x[:, None, :] - templates[None, :, :].astype(np.float32)) ** 2).sum(axis=2)
    return float((d.argmin(axis=1) == labels).mean())


def init_params(sizes):
    """Weights (He initialisation, drawn by weft's generator) and zero biases, with gradients."""
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        w = weft.random.normal(0.0, (2.0 / fan_in) ** 0.5, shape=(fan_out, fan_in))
        b = weft.zeros((fan_out,))
        params += [w, b]
    for p in params:
        p.attach_grad()
    return params


def forward(x, params):
    """Logits of the MLP: FullyConnected + ReLU per hidden layer, then FullyConnected."""
    h = x
    layers = len(params) // 2
    for i in range(layers):
        w, b = params[2 * i], params[2 * i + 1]
        h = weft.op.FullyConnected(h, w, b, num_hidden=w.shape[0])
        if i + 1 < layers:
            h = weft.op.Activation(h, act_type="relu")
    return h


def progress(epoch, epochs, step, steps, loss, width=30):
    """One line of text, redrawn in place: a bar, the step count and the last loss read."""
    filled = int(width * step / steps)
    bar = "#" * filled + "." * (width - filled)
    text = "" if loss is None else f"  loss {loss:.4f}"
    sys.stdout.write(f"\repoch {epoch}/{epochs} [{bar}] {step}/{steps}{text}")
    sys.stdout.flush()


def accuracy(x, labels, params, batch=1000):
    """Fraction of rows of `x` (a weft array) whose argmax logit is the label."""
    correct = 0
    with weft.autograd.pause():
        for i in range(0, x.shape[0], batch):
            pred = forward(x[i:i + batch], params).argmax(axis=1).asnumpy()
            correct += int((pred.astype(np.int64) == labels[i:i + batch]).sum())
    return correct / x.shape[0]


def save_curve(path, losses, steps_per_epoch):
    """The loss per step as a PNG; skipped with a message when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: not writing {path}")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    steps = np.arange(1, len(losses) + 1)
    ax.plot(steps / steps_per_epoch, losses, linewidth=0.8)
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss (cross-entropy)")
    ax.set_yscale("log")
    ax.set_title("weft: MLP 784-512-512-10, SGD, synthetic data")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05, help="SGD learning rate")
    parser.add_argument("--hidden", type=int, nargs="+", default=[512, 512],
                        help="hidden layer sizes (default: 512 512)")
    parser.add_argument("--train-size", type=int, default=12000)
    parser.add_argument("--test-size", type=int, default=2000)
    parser.add_argument("--noise", type=float, default=1.0,
                        help="noise standard deviation (templates have 0.1 per pixel)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="out", help="folder for mlp_loss.png (default: out)")
    parser.add_argument("--read-every", type=int, default=20,
                        help="read the loss (and wait) every N steps for the progress bar")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.batch < 1 or args.train_size < args.batch:
        parser.error("--epochs and --batch must be positive, --train-size at least --batch")

    rng = np.random.default_rng(args.seed)
    weft.seed(args.seed)
    templates = rng.normal(0.0, 0.1, size=(NUM_CLASSES, IMAGE))
    x_train, y_train = make_data(args.train_size, templates, args.noise, rng)
    x_test, y_test = make_data(args.test_size, templates, args.noise, rng)
    # Uploaded once; x[i:i + batch] below is a view, not a copy.
    x_train_w, onehot_w = weft.array(x_train), weft.array(one_hot(y_train))
    x_test_w = weft.array(x_test)

    params = init_params([IMAGE, *args.hidden, NUM_CLASSES])
    steps = args.train_size // args.batch
    print(f"weft {weft.__version__}: MLP {'-'.join(map(str, [IMAGE, *args.hidden, 10]))}, "
          f"{args.train_size} training / {args.test_size} test samples, batch {args.batch}, "
          f"SGD lr {args.lr}")
    print(f"before training: test accuracy {accuracy(x_test_w, y_test, params):.1%} "
          f"(chance 10%; the nearest true template scores "
          f"{nearest_template_accuracy(x_test, y_test, templates):.1%})")

    losses = []
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(steps)  # shuffled batches (whole batches; samples are i.i.d.)
        pending = []
        last = None
        start = time.perf_counter()
        for step, k in enumerate(order, 1):
            i = int(k) * args.batch
            x, target = x_train_w[i:i + args.batch], onehot_w[i:i + args.batch]
            with weft.autograd.record():
                logp = weft.op.log_softmax(forward(x, params), axis=-1)
                loss = -(logp * target).sum() / args.batch
            loss.backward()
            for w in params:
                w -= args.lr * w.grad
            pending.append(loss)
            if step % args.read_every == 0 or step == steps:
                losses += [p.item() for p in pending]  # waits for these steps
                pending.clear()
                last = losses[-1]
                progress(epoch, args.epochs, step, steps, last)
        seconds = time.perf_counter() - start
        acc = accuracy(x_test_w, y_test, params)
        epoch_loss = float(np.mean(losses[-steps:]))
        sys.stdout.write(f"\repoch {epoch}/{args.epochs} [{'#' * 30}] {steps}/{steps}  "
                         f"loss {epoch_loss:.4f}  test accuracy {acc:.1%}  "
                         f"({seconds:.1f} s, {steps * args.batch / seconds:,.0f} samples/s)\n")
    weft.waitall()

    os.makedirs(args.out, exist_ok=True)
    save_curve(os.path.join(args.out, "mlp_loss.png"), losses, steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
