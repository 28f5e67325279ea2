"""tf.data peer of the input-pipeline benchmark (bench/data), run where TensorFlow is installed.

The same pipeline as weft's and torch_loader.py's, the tf.data way: from_tensor_slices ->
shuffle(1024) -> map(read + decode_jpeg(3) + random_crop 200x200 + resize 224x224 bilinear +
random_flip_left_right + /255 + normalize + HWC->CHW, num_parallel_calls=cores) ->
batch(64, drop_remainder) -> prefetch(2). tf.data has no reader of memory-mapped .npy files, so
the npy workload loads the shards into memory and slices them (from_tensor_slices), as tf.data
users do. Same timing and output as torch_loader.py (peak RSS: VmHWM, one process).
"""

import argparse
import os
import resource
import sys
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

from peer_common import (BATCH, CROP, MEAN, SHARDS, SIDE, STD,  # noqa: E402
                         list_images, proc_status_kib, pss_kib)


def augment(image):
    mean = tf.constant(MEAN, tf.float32)
    std = tf.constant(STD, tf.float32)
    image = tf.image.random_crop(image, [CROP, CROP, 3])
    image = tf.image.resize(image, [SIDE, SIDE], method="bilinear")  # float32 in [0, 255]
    image = tf.image.random_flip_left_right(image)
    image = (image / 255.0 - mean) / std
    return tf.transpose(image, [2, 0, 1])


def make_dataset(args):
    if args.workload == "jpeg":
        samples = list_images(args.root)
        paths = [path for path, _ in samples]
        labels = np.array([label for _, label in samples], np.int32)
        ds = tf.data.Dataset.from_tensor_slices((paths, labels))

        def load(path, label):
            image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
            return augment(image), label
    else:
        npy = os.path.join(args.root, "npy")
        x = np.concatenate([np.load(os.path.join(npy, f"x{s}.npy")) for s in range(SHARDS)])
        y = np.concatenate([np.load(os.path.join(npy, f"y{s}.npy")) for s in range(SHARDS)])
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        del x, y

        def load(image, label):
            return augment(image), label

    return (
        ds.shuffle(1024, seed=args.seed, reshuffle_each_iteration=True)
        .map(load, num_parallel_calls=args.workers, deterministic=True)
        .batch(BATCH, drop_remainder=True)
        .prefetch(2)
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=["jpeg", "npy"], required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--min-epochs", type=int, default=2)
    p.add_argument("--warmup-batches", type=int, default=3)
    args = p.parse_args()
    tf.random.set_seed(args.seed)
    if args.workload == "jpeg":
        print(f"# tf.data peer: tensorflow {tf.__version__}, num_parallel_calls={args.workers}",
              flush=True)
    ds = make_dataset(args)

    start = time.perf_counter()
    it = iter(ds)
    for b in range(args.warmup_batches):
        x, y = next(it)
        if b == 0:
            startup_ms = (time.perf_counter() - start) * 1e3
            assert tuple(x.shape) == (BATCH, 3, SIDE, SIDE) and x.dtype == tf.float32, x.shape
    del it

    samples = epochs = batches = 0
    start = time.perf_counter()
    while True:
        for x, y in ds:
            samples += int(x.shape[0])
            batches += 1
        epochs += 1
        seconds = time.perf_counter() - start
        if epochs >= args.min_epochs and seconds >= args.seconds:
            break
    # VmHWM, not ru_maxrss (which would start at the spawning driver's peak).
    rss = proc_status_kib(os.getpid(), "VmHWM")
    rss = rss or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"result side=tf.data workload={args.workload} samples={samples} seconds={seconds:.4f} "
        f"epochs={epochs} batches={batches} rss_kib={rss} pss_end_kib={pss_kib(os.getpid())} "
        f"startup_ms={startup_ms:.1f}",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
