"""PyTorch peer of the input-pipeline benchmark (bench/data): DataLoader over the same files.

Run by weft_data_bench (bench/run.sh data) with Debian's /usr/bin/python3 (torch 1.13, PIL 9.4,
no torchvision): the transforms are written out the way torchvision 0.14 implements them on PIL
images (RandomCrop, Resize BILINEAR, RandomHorizontalFlip, ToTensor, Normalize), and the loader is
DataLoader(num_workers=cores, batch_size=64, shuffle=True, drop_last=True, pin_memory=False,
persistent_workers=True, prefetch_factor=2). A warm-up of a few batches (which starts the
workers), then whole epochs until --seconds and --min-epochs are both reached. Prints "# ..."
lines and one "result side=torch ..." line (peak RSS: the VmHWM of the main process + workers,
in KiB);
--workload breakdown instead times each stage on one thread ("stage name=... us=..." lines).
"""

import argparse
import bisect
import io
import os
import resource
import sys
import time

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torch.utils.data._utils.collate import default_collate

from peer_common import (BATCH, CROP, MEAN, SHARDS, SIDE, STD,
                         list_images, proc_status_kib, pss_kib)

NUM_CLASSES = 10


class Augment:
    """RandomCrop(200) -> Resize((224, 224)) -> RandomHorizontalFlip -> ToTensor -> Normalize."""

    def __init__(self):
        self.mean = torch.tensor(MEAN, dtype=torch.float32).view(-1, 1, 1)
        self.std = torch.tensor(STD, dtype=torch.float32).view(-1, 1, 1)

    @staticmethod
    def crop_box(height, width):
        top = int(torch.randint(0, height - CROP + 1, size=(1,)).item())
        left = int(torch.randint(0, width - CROP + 1, size=(1,)).item())
        return top, left

    def crop(self, img):
        top, left = self.crop_box(img.size[1], img.size[0])
        return img.crop((left, top, left + CROP, top + CROP))

    @staticmethod
    def resize(img):
        return img.resize((SIDE, SIDE), Image.BILINEAR)

    @staticmethod
    def flip(img):
        return img.transpose(Image.FLIP_LEFT_RIGHT) if torch.rand(1) < 0.5 else img

    @staticmethod
    def to_tensor(img):
        t = torch.from_numpy(np.array(img, np.uint8, copy=True))
        t = t.view(img.size[1], img.size[0], len(img.getbands())).permute((2, 0, 1)).contiguous()
        return t.to(dtype=torch.float32).div(255)

    def normalize(self, t):
        return t.sub_(self.mean).div_(self.std)

    def __call__(self, img):
        return self.normalize(self.to_tensor(self.flip(self.resize(self.crop(img)))))


def decode(data):
    """torchvision's pil_loader on bytes: open, then convert("RGB") (which loads)."""
    return Image.open(io.BytesIO(data)).convert("RGB")


class JpegFolder(Dataset):
    def __init__(self, root):
        self.samples = list_images(root)
        self.augment = Augment()

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        return self.augment(img), label


class NpyShards(Dataset):
    """Rows of memory-mapped uint8 [n, 224, 224, 3] shards; the crop is taken on the mapping
    (no copy of the full row), then the 200x200 window goes through PIL like the JPEGs."""

    def __init__(self, root):
        npy = os.path.join(root, "npy")
        self.xs = [np.load(os.path.join(npy, f"x{s}.npy"), mmap_mode="r") for s in range(SHARDS)]
        self.ys = [np.load(os.path.join(npy, f"y{s}.npy"), mmap_mode="r") for s in range(SHARDS)]
        self.starts = np.cumsum([0] + [len(x) for x in self.xs]).tolist()
        self.augment = Augment()

    def __len__(self):
        return self.starts[-1]

    def __getitem__(self, i):
        s = bisect.bisect_right(self.starts, i) - 1
        row = self.xs[s][i - self.starts[s]]
        top, left = Augment.crop_box(row.shape[0], row.shape[1])
        img = Image.fromarray(np.ascontiguousarray(row[top : top + CROP, left : left + CROP]))
        a = self.augment
        return a.normalize(a.to_tensor(a.flip(a.resize(img)))), int(self.ys[s][i - self.starts[s]])


def check_batch(x, y):
    low, high = (0 - 0.485) / 0.229 - 1e-3, (1 - 0.406) / 0.225 + 1e-3
    assert x.dtype == torch.float32 and tuple(x.shape) == (BATCH, 3, SIDE, SIDE), x.shape
    assert tuple(y.shape) == (BATCH,), y.shape
    assert float(x.min()) >= low and float(x.max()) <= high, (float(x.min()), float(x.max()))
    assert abs(float(x.mean())) < 1.5
    assert 0 <= int(y.min()) and int(y.max()) < NUM_CLASSES
    assert len(set(y.tolist())) >= 3, "not shuffled"


def run_loader(args):
    if args.workload == "jpeg":
        print(f"# torch peer: torch {torch.__version__}, PIL {Image.__version__}, "
              f"numpy {np.__version__}, DataLoader with {args.workers} workers", flush=True)
    dataset = JpegFolder(args.root) if args.workload == "jpeg" else NpyShards(args.root)
    loader = DataLoader(
        dataset,
        batch_size=BATCH,
        shuffle=True,
        drop_last=True,
        num_workers=args.workers,
        pin_memory=False,
        persistent_workers=True,
        prefetch_factor=2,
        generator=torch.Generator().manual_seed(args.seed),
    )
    start = time.perf_counter()
    it = iter(loader)
    for b in range(args.warmup_batches):
        x, y = next(it)
        if b == 0:
            startup_ms = (time.perf_counter() - start) * 1e3
            check_batch(x, y)
    del it

    samples = epochs = batches = 0
    start = time.perf_counter()
    while True:
        for x, y in loader:
            samples += x.shape[0]
            batches += 1
        epochs += 1
        seconds = time.perf_counter() - start
        if epochs >= args.min_epochs and seconds >= args.seconds:
            break

    workers = [w.pid for w in loader._iterator._workers]
    # VmHWM, not ru_maxrss: ru_maxrss survives exec and so starts at the spawning driver's peak
    # (Note [Peak RSS of a spawned process] in weft_loader.cc).
    rss_main = proc_status_kib(os.getpid(), "VmHWM")
    worker_hwm = [proc_status_kib(pid, "VmHWM") for pid in workers]
    rss_workers = sum(worker_hwm)
    pss_end = pss_kib(os.getpid()) + sum(pss_kib(pid) for pid in workers)
    everyone = [os.getpid()] + workers
    rss_anon = sum(proc_status_kib(pid, "RssAnon") for pid in everyone)
    rss_file = sum(proc_status_kib(pid, "RssFile") for pid in everyone)
    loader._iterator._shutdown_workers()
    largest_child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(
        f"# torch {args.workload}: {len(workers)} workers; {batches} batches in {seconds:.2f} s; "
        f"VmHWM main {rss_main / 1024:.0f} MiB, workers "
        f"{' + '.join(str(proc_kib // 1024) for proc_kib in worker_hwm)} MiB "
        f"(ru_maxrss of the largest reaped child: {largest_child / 1024:.0f} MiB); at the end, "
        f"summed over the processes, RssAnon {rss_anon / 1024:.0f} MiB, RssFile "
        f"{rss_file / 1024:.0f} MiB",
        flush=True,
    )
    print(
        f"result side=torch workload={args.workload} samples={samples} seconds={seconds:.4f} "
        f"epochs={epochs} batches={batches} rss_kib={rss_main + rss_workers} "
        f"rss_main_kib={rss_main} rss_workers_kib={rss_workers} pss_end_kib={pss_end} "
        f"startup_ms={startup_ms:.1f}",
        flush=True,
    )


def run_breakdown(args):
    """Each stage on this thread, us per sample (after a warm-up round)."""
    torch.set_num_threads(1)
    samples = list_images(args.root)[: args.breakdown_samples]
    a = Augment()
    stages = [("decode", decode), ("crop", a.crop), ("resize", a.resize), ("flip", a.flip),
              ("to_tensor", a.to_tensor), ("normalize", a.normalize)]
    totals = {}
    last = None
    for rnd in range(2):
        totals = {"read": 0.0, **{name: 0.0 for name, _ in stages}}
        for path, label in samples:
            t = time.perf_counter()
            with open(path, "rb") as f:
                value = f.read()
            totals["read"] += time.perf_counter() - t
            for name, fn in stages:
                t = time.perf_counter()
                value = fn(value)
                totals[name] += time.perf_counter() - t
            last = (value, label)
    for name, total in totals.items():
        print(f"stage name={name} us={total / len(samples) * 1e6:.2f}", flush=True)
    rounds = 16
    for rnd in range(2):
        t = time.perf_counter()
        for _ in range(rounds):
            default_collate([last] * BATCH)
        collate_s = time.perf_counter() - t
    print(f"stage name=collate us={collate_s / (rounds * BATCH) * 1e6:.2f}", flush=True)
    print(f"result side=torch workload=breakdown samples={len(samples)}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=["jpeg", "npy", "breakdown"], required=True)
    p.add_argument("--root", required=True, help="the folder weft_data_bench generated")
    p.add_argument("--workers", type=int, default=os.cpu_count())
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--min-epochs", type=int, default=2)
    p.add_argument("--warmup-batches", type=int, default=3)
    p.add_argument("--breakdown-samples", type=int, default=256)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    if args.workload == "breakdown":
        run_breakdown(args)
    else:
        run_loader(args)


if __name__ == "__main__":
    sys.exit(main())
