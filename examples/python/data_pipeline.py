"""An input pipeline with weft.data: a folder of JPEG images (written here, one subfolder per
class) decoded and augmented in parallel, batched and prefetched while the "training step" runs.

    python examples/python/data_pipeline.py [--images 256] [--epochs 2] [--batch 32]

Prints a progress bar per epoch (stderr) and each epoch's throughput (stdout).
"""
import argparse
import pathlib
import tempfile
import time

import numpy as np

import weft
import weft.data as wd

# Sorted by name, as image_folder numbers classes: label c is colour channel c.
CLASSES = ["0_red", "1_green", "2_blue"]


def write_image_folder(root, count, seed=0):
    """`count` JPEG images of 48x64 pixels, tinted by class, under root/<class>/."""
    rng = np.random.default_rng(seed)
    for c, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True, exist_ok=True)
    for i in range(count):
        c = i % len(CLASSES)
        img = rng.integers(0, 96, (48, 64, 3), dtype=np.uint8)
        img[..., c] += 150  # the class's colour channel dominates
        (root / CLASSES[c] / f"{i:05d}.jpg").write_bytes(wd.encode_jpeg(img, quality=90))


def make_pipeline(root, batch, workers, seed):
    augment = wd.compose(
        wd.decode_image(channels=3),
        wd.random_crop(40, 56),
        wd.random_flip_left_right(),
        wd.to_tensor(),
        wd.normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25]),
    )
    return (wd.image_folder(root)
            .shuffle(1024, seed=seed)
            .map(augment, num_parallel=workers, seed=seed)
            .batch(batch, drop_remainder=True)
            .prefetch(4))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--step-ms", type=float, default=2.0,
                        help="time the pretend training step takes per batch")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp) / "images"
        write_image_folder(root, args.images)
        ds = make_pipeline(root, args.batch, args.workers, seed=0)
        print(f"classes {wd.image_folder_classes(root)}; pipeline: {ds.describe()}")
        for epoch in range(args.epochs):
            it = ds.iterate(progress=True)
            batches = agree = 0
            for images, labels in it:
                # The "training step": checks the labels against the images' dominant colour
                # channel (the folders are named after it), then pauses.
                dominant = images.asnumpy().mean(axis=(2, 3)).argmax(axis=1)
                agree += int((dominant == labels.asnumpy()).sum())
                time.sleep(args.step_ms / 1000)
                batches += 1
            s = it.stats()
            shape = tuple(images.shape) if batches else ()
            print(f"epoch {epoch}: {batches} batches of {shape}, {s.samples_per_s:,.0f} "
                  f"samples/s, the step waited for data {100 * s.wait_fraction:.0f}% of the time, "
                  f"labels agree with the colour for {agree}/{s.samples} images")
    weft.waitall()


if __name__ == "__main__":
    main()
