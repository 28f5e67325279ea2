#!/usr/bin/env python3
"""The models of the replay benchmark: short names, graph files and inputs.

Every MXNet symbol JSON of ../shared/models (SOURCES.md there; the three TVM graph-executor
files are not MXNet symbols and are left out). The input shapes are those of
tests/graph/model_inputs.h and tests/mxnet/models_check.py (keep the three in step).

  models.py names                 the short names, one per line (the table's order)
  models.py big                   the models also run at batch 32
  models.py file NAME             the graph file's name
  models.py inputs NAME BATCH DIR writes DIR/input_<input>.npy per input and prints one
                                  `<input>=<path>` line per input (the order of the graph)

Inputs at batch N (NumPy, seeded by the model's name, so every tool reads the same files):
images and vectors uniform in [-1, 1) ([0, 255) for MobileFaceNet, whose graph subtracts 127.5
and scales by 1/128); LSTM states uniform in [-1, 1); token ids and SoftmaxOutput labels
uniform over the classes (labels do not change the forward pass, but MXNet binds them); CTC
labels over 1..C-1 (0 is the blank). Only the standard library and NumPy are used.
"""

import os
import sys
import zlib

import numpy as np


def U(lo, hi):
    return ("uniform", lo, hi)


def IDS(n):
    return ("ids", n)


def CTC(n):
    return ("ctc", n)


def _states(layers, width):
    return [("l%d_init_%s" % (l, k), (width,), U(-1, 1)) for l in range(layers) for k in "hc"]


# name -> (file, [(input, dims after the batch dimension, generator)], steps). An input name
# ending in "#" stands for "<stem>0" ... "<stem><steps - 1>" (one input per unrolled step).
MODELS = {
    "resnet50": ("pathak-ashutosh__plant-seeds-classification__resnet-50-symbol.json",
                 [("data", (3, 224, 224), U(-1, 1))], 0),
    "mobilenetv2": ("KeyKy__mobilenet-mxnet__mobilenet_v2-symbol.json",
                    [("data", (3, 224, 224), U(-1, 1))], 0),
    "inceptionv3": ("soeaver__mxnet-model__inception_v3-symbol.json",
                    [("data", (3, 299, 299), U(-1, 1))], 0),
    "squeezenet": ("miaow1988__SqueezeNet_v1.2__model-symbol.json",
                   [("data", (3, 224, 224), U(-1, 1))], 0),
    # MTCNN P-Net: fully convolutional, trained on 12x12 crops.
    "mtcnn_pnet": ("deepinsight__insightface__det1-symbol.json", [("data", (3, 12, 12), U(-1, 1))], 0),
    # CRNN: 80 rows become 20 LSTM steps; width 32; 4 layers of 100 units; CTC labels of 4
    # characters over 27 classes.
    "crnn": ("Mengman__TensorRT_Tutorial__ocr-symbol.json",
             [("data", (1, 80, 32), U(-1, 1)), ("label", (4,), CTC(27))] + _states(4, 100), 0),
    # Gluon HybridSequential MLP with a deferred input width: MNIST vectors.
    "gluon_mlp": ("kylehoffpauir__AdvOSBig__net-symbol.json", [("data", (784,), U(-1, 1))], 0),
    # MXNet's legacy-loader test fixture: an MLP with BatchNorm on MNIST vectors.
    "mxnet_mlp": ("apache__mxnet__save_000800.json", [("data", (784,), U(-1, 1))], 0),
    "se_resnext50": ("soeaver__mxnet-model__se-resnext50-32x4d-symbol.json",
                     [("data", (3, 224, 224), U(-1, 1))], 0),
    # VGG-16 "reduced" (SSD's base net), saved by an MKL-DNN build of MXNet.
    "vgg16_reduced": ("apache__mxnet__test_mkldnn_test_mkldnn_model_model1.json",
                      [("data", (3, 224, 224), U(-1, 1))], 0),
    # RetinaFace MobileNet-0.25 at its deployed 640x640.
    "retinaface": ("bogireddytejareddy__retinaface-pytorch__mnet.25-symbol.json",
                   [("data", (3, 640, 640), U(-1, 1))], 0),
    # Gluon model-zoo export of ResNet-18 v1.
    "resnet18": ("fqararyah__tvm-cuda-int8-benchmark__resnet18_v1-symbol.json",
                 [("data", (3, 224, 224), U(-1, 1))], 0),
    "mobilefacenet": ("MirrorYuChen__tvm_insightface__model-symbol.json",
                      [("data", (3, 112, 112), U(0, 255))], 0),
    # char-rnn: 3 LSTM layers of 512 units unrolled over 129 steps; one token id (84 symbols) and
    # one label per sequence and step.
    "char_lstm": ("lucasjinreal__Char-Generator-LSTM__obama-symbol.json",
                  [("data/#", (), IDS(84)), ("label/#", (), IDS(84))] + _states(3, 512), 129),
}

# The big CNNs, run at batch 32 as well.
BIG = ("resnet50", "mobilenetv2", "inceptionv3")


def expand(name):
    """[(input name, dims after batch, generator)] with "#" names expanded over the steps."""
    _, inputs, steps = MODELS[name]
    out = []
    for n, dims, gen in inputs:
        if n.endswith("#"):
            out += [(n[:-1] + str(t), dims, gen) for t in range(steps)]
        else:
            out.append((n, dims, gen))
    return out


def draw(rng, shape, gen):
    kind = gen[0]
    if kind == "uniform":
        return rng.uniform(gen[1], gen[2], size=shape).astype(np.float32)
    if kind == "ids":
        return rng.integers(0, gen[1], size=shape).astype(np.float32)
    if kind == "ctc":
        return rng.integers(1, gen[1], size=shape).astype(np.float32)
    raise ValueError("unknown input generator %r" % (gen,))


def write_inputs(name, batch, out_dir):
    """Writes the inputs of model `name` at batch `batch`; returns [(input, path)]."""
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(zlib.crc32(name.encode()) + batch)
    written = []
    for n, dims, gen in expand(name):
        path = os.path.join(out_dir, "input_%s.npy" % n.replace("/", "_"))
        np.save(path, draw(rng, (batch,) + tuple(dims), gen))
        written.append((n, path))
    return written


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    cmd = argv[0]
    if cmd == "names" and len(argv) == 1:
        print("\n".join(MODELS))
        return 0
    if cmd == "big" and len(argv) == 1:
        print("\n".join(BIG))
        return 0
    if cmd in ("file", "inputs") and len(argv) >= 2 and argv[1] not in MODELS:
        print("models.py: unknown model '%s' (known: %s)" % (argv[1], ", ".join(MODELS)), file=sys.stderr)
        return 2
    if cmd == "file" and len(argv) == 2:
        print(MODELS[argv[1]][0])
        return 0
    if cmd == "inputs" and len(argv) == 4:
        for n, path in write_inputs(argv[1], int(argv[2]), argv[3]):
            print("%s=%s" % (n, path))
        return 0
    print("models.py: bad arguments %s (see --help)" % " ".join(argv), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
