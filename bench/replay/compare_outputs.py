#!/usr/bin/env python3
"""Compares the heads two tools wrote (DIR/k.npy, k = 0, 1, ...) for the replay benchmark.

  compare_outputs.py WEFT_DIR PEER_DIR [--heads all|K[,K...]|from:K] [--rtol R]

Per head: max abs difference, and max relative difference = max abs difference / max |peer|
(the head's scale: random weights make many elements cancellation noise near zero, so an
element-wise relative error would compare noise). 2-D heads also give the share of rows whose
argmax agrees. Prints one line: `heads=N max_abs=... max_rel=... [argmax_agree=...]` (worst over
the heads, naming the worst head), or `MISMATCH ...` with exit status 1 when a head's shape
differs, a value is not finite, or max_rel is above --rtol (default 1e-3). A head missing from
PEER_DIR ends the list; a head missing from WEFT_DIR is a mismatch. Only NumPy is used.

Random weights saturate some classifiers' softmax into one-hot vectors, which agree whatever
came before them: the benchmark also compares the softmax inputs (mxnet_to_torch.py logits-graph;
--heads from:K selects the extra heads, K = the graph's own head count).
"""

import argparse
import os
import sys

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("weft_dir")
    p.add_argument("peer_dir")
    p.add_argument("--heads", default="all")
    p.add_argument("--rtol", type=float, default=1e-3)
    args = p.parse_args(argv)

    def exists(d, k):
        return os.path.exists(os.path.join(d, "%d.npy" % k))

    count = 0
    while exists(args.peer_dir, count):
        count += 1
    if args.heads == "all":
        heads = list(range(count))
    elif args.heads.startswith("from:"):
        heads = list(range(int(args.heads[5:]), count))
    else:
        heads = [int(k) for k in args.heads.split(",")]
    if not heads:
        print("no heads to compare in %s" % args.peer_dir)
        return 1
    worst = None  # (max_rel, head, max_abs)
    agree = None
    problems = []
    for k in heads:
        if not exists(args.peer_dir, k):
            problems.append("head %d: the peer wrote no %d.npy" % (k, k))
            continue
        if not exists(args.weft_dir, k):
            problems.append("head %d: weft wrote no %d.npy" % (k, k))
            continue
        a = np.load(os.path.join(args.weft_dir, "%d.npy" % k)).astype(np.float64)
        b = np.load(os.path.join(args.peer_dir, "%d.npy" % k)).astype(np.float64)
        if a.shape != b.shape:
            problems.append("head %d: shape weft %s peer %s" % (k, a.shape, b.shape))
            continue
        if not np.isfinite(a).all() or not np.isfinite(b).all():
            problems.append("head %d: not finite (weft %s, peer %s)" % (k, np.isfinite(a).all(),
                                                                         np.isfinite(b).all()))
            continue
        if a.size == 0:
            continue
        diff = np.abs(a - b)
        rel = diff.max() / max(np.abs(b).max(), 1e-30)
        if worst is None or rel > worst[0]:
            worst = (rel, k, diff.max())
        if rel > args.rtol:
            problems.append("head %d: max_rel %.3g above %g" % (k, rel, args.rtol))
        if a.ndim == 2 and a.shape[1] > 1:
            share = float((a.argmax(1) == b.argmax(1)).mean())
            agree = share if agree is None else min(agree, share)
    words = "heads=%d" % len(heads)
    if worst is not None:
        words += " max_abs=%.3g max_rel=%.3g" % (worst[2], worst[0])
        if len(heads) > 1:
            words += " (head %d)" % worst[1]
    if agree is not None:
        words += " argmax_agree=%.2f" % agree
    if problems:
        print("MISMATCH %s: %s" % (words, "; ".join(problems[:3]) + (" ..." if len(problems) > 3 else "")))
        return 1
    print(words)
    return 0


if __name__ == "__main__":
    sys.exit(main())
