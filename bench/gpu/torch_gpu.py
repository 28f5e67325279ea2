"""PyTorch's side of bench/run.sh gpu: the same workloads as weft_gpu_bench on the same GPU, eager,
printed as "gpu_<workload> torch=<value>". fp32 convolution and matmul run without TF32, as weft's
kernels do."""
import statistics
import sys
import time

import torch

quick = "--quick" in sys.argv
reps = 3 if quick else 7
dev = torch.device("cuda:0")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True


def timed(fn):
    fn()
    torch.cuda.synchronize()
    t = []
    for _ in range(reps):
        s = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        t.append((time.perf_counter() - s) * 1e3)
    return statistics.median(t)


a = torch.zeros(1, device=dev)
n = 2000 if quick else 20000
keep = [None] * n


def tiny():
    for i in range(n):
        keep[i] = a + 1


print(f"gpu_tiny_op_us torch={timed(tiny) * 1000 / n:.3f}")


def chain():
    x = torch.zeros(1, device=dev)
    for _ in range(10000):
        x = x + 1


print(f"gpu_chain_10000_us torch={timed(chain) * 1000 / 10000:.3f}")

for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
    x = torch.rand(32, 64, 56, 56, device=dev, dtype=dtype) * 2 - 1
    w = (torch.rand(64, 64, 3, 3, device=dev, dtype=dtype) - 0.5) * 0.2

    def conv():
        for _ in range(10):
            torch.nn.functional.conv2d(x, w, padding=1)

    print(f"gpu_conv3x3_64_56_b32_{name}_ms torch={timed(conv) / 10:.4f}")
    p = torch.rand(4096, 4096, device=dev, dtype=dtype)
    q = torch.rand(4096, 4096, device=dev, dtype=dtype)

    def mm():
        for _ in range(10):
            p @ q

    print(f"gpu_matmul_4096_{name}_ms torch={timed(mm) / 10:.4f}")
