"""What the Python peers of the input-pipeline benchmark share: the pipeline's constants, the
image-folder listing and /proc memory readings."""

import os

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
CROP = 200
SIDE = 224
BATCH = 64
SHARDS = 4


def list_images(root):
    """(path, label) pairs like torchvision's ImageFolder: classes and files sorted by name."""
    folder = os.path.join(root, "jpeg")
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    samples = []
    for label, name in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(folder, name))):
            if f.lower().endswith((".jpg", ".jpeg", ".png")):
                samples.append((os.path.join(folder, name, f), label))
    return samples


def proc_status_kib(pid, key):
    """A kB field of /proc/PID/status (VmHWM, RssAnon, ...); 0 when unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pss_kib(pid):
    """The proportional set size of PID in kB; 0 when unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
