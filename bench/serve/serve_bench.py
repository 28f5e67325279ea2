#!/usr/bin/env python3
"""`weft serve` against a PyTorch server on the same graph, weights and input (bench/serve/run.sh
documents the method; this script is its body). Standard library and NumPy only."""
import argparse
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = {
    "resnet18": "fqararyah__tvm-cuda-int8-benchmark__resnet18_v1-symbol.json",
    "mobilenetv2": "KeyKy__mobilenet-mxnet__mobilenet_v2-symbol.json",
}
ROW = (3, 224, 224)


def log(msg):
    print("# " + msg, flush=True)


class Proc:
    """A server process started with --port 0 --port-file; stopped with SIGTERM."""

    def __init__(self, argv, work, name):
        self.port_file = os.path.join(work, name + ".port")
        if os.path.exists(self.port_file):
            os.remove(self.port_file)
        self.log_path = os.path.join(work, name + ".log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv + ["--port", "0", "--port-file", self.port_file],
                                     stdout=self.log, stderr=self.log)
        deadline = time.time() + 300
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.time() > deadline:
                self.log.close()
                sys.stderr.write(open(self.log_path).read()[-3000:])
                raise SystemExit("bench serve: %s did not start" % name)
            time.sleep(0.1)
        self.port = int(open(self.port_file).read())

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def post(port, path, body):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body,
                                 headers={"Content-Type": "application/x-npy"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return np.load(io.BytesIO(r.read()), allow_pickle=False)


UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk(port, path, body_file, conns, seconds, delay_ms=0.0):
    env = dict(os.environ, WEFT_BENCH_PATH=path, WEFT_BENCH_BODY=body_file,
               WEFT_BENCH_DELAY_MS="%g" % delay_ms)
    out = subprocess.run(["wrk", "-t%d" % min(2, conns), "-c%d" % conns, "-d%ds" % seconds,
                          "--timeout", "60s", "--latency", "-s", os.path.join(HERE, "post_npy.lua"),
                          "http://127.0.0.1:%d" % port], env=env, capture_output=True, text=True,
                         check=True).stdout
    res = {"conns": conns, "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))}
    for pct in ("50", "99"):
        m = re.search(r"^\s+%s%%\s+([\d.]+)(us|ms|s)\s*$" % pct, out, re.M)
        res["p" + pct] = float(m.group(1)) * UNITS[m.group(2)] if m else float("nan")
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    if bad or errors:
        raise SystemExit("bench serve: failed requests on port %d (%s%s)\n%s" %
                         (port, bad.group(0) if bad else "", errors.group(0) if errors else "", out))
    return res


def show(label, r):
    log("%-34s c=%-3d %8.1f req/s  p50 %8.1f ms  p99 %8.1f ms" %
        (label, r["conns"], r["rps"], r["p50"], r["p99"]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--models", default=None)
    p.add_argument("--seconds", type=int, default=None)
    p.add_argument("--keep", default=None)
    a = p.parse_args()
    repo_root = os.path.abspath(os.path.join(HERE, "..", ".."))
    weft = os.environ.get("WEFT_BIN", os.path.join(repo_root, "build", "tools", "weft"))
    models_dir = os.environ.get("WEFT_MODELS_DIR", os.path.join(repo_root, "..", "shared", "models"))
    python = os.environ.get("WEFT_PYTHON", "/usr/bin/python3")
    models = (a.models or ("resnet18" if a.quick else "resnet18,mobilenetv2")).split(",")
    seconds = a.seconds or (3 if a.quick else 8)
    sweep = (1, 4, 8) if a.quick else (1, 2, 4, 8, 16)
    work = a.keep or tempfile.mkdtemp(prefix="weft-bench-serve-")
    os.makedirs(work, exist_ok=True)
    log("weft serve vs a PyTorch %s server (bench/serve/torch_server.py), wrk on loopback, %d s "
        "per run, batch-1 requests" % (subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                                                       capture_output=True, text=True).stdout.strip(), seconds))
    failed = False
    try:
        for model in models:
            graph = os.path.join(models_dir, MODELS[model])
            repo = os.path.join(work, "repo")
            folder = os.path.join(repo, model)
            os.makedirs(folder, exist_ok=True)
            shutil.copy(graph, os.path.join(folder, model + "-symbol.json"))
            params = os.path.join(folder, model + "-0000.params")
            subprocess.run([weft, "replay", graph, "--input", "data=1x3x224x224", "--seed", "1",
                            "--iters", "1", "--warmup", "0", "--quiet", "--save-params", params],
                           check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(folder, "config.json"), "w") as f:
                json.dump({"inputs": [{"name": "data", "shape": [0] + list(ROW)}], "max_batch": 8,
                           "max_delay_ms": 2}, f)
            body = os.path.join(work, model + "-x.npy")
            np.save(body, np.random.RandomState(1).uniform(-1, 1, (1,) + ROW).astype(np.float32))
            payload = open(body, "rb").read()
            path = "/v1/models/%s/infer" % model
            servers = [
                ("weft batching", [weft, "serve", "--models", repo, "--reload-ms", "0"]),
                ("weft no batching", [weft, "serve", "--models", repo, "--reload-ms", "0",
                                      "--no-batching"]),
                ("torch", [python, os.path.join(HERE, "torch_server.py"), "--graph", graph,
                           "--params", params, "--name", model, "--shape", "x".join(map(str, ROW))]),
            ]
            results, outputs = {}, {}
            for label, argv in servers:
                proc = Proc(argv, work, model + "-" + label.replace(" ", "_"))
                try:
                    outputs[label] = post(proc.port, path, payload)
                    wrk(proc.port, path, body, 2, 1)  # warm-up (binds, first-run kernels)
                    single = wrk(proc.port, path, body, 1, seconds)
                    runs = [single] + [wrk(proc.port, path, body, c, seconds) for c in sweep if c > 1]
                    for r in runs:
                        show("%s %s" % (model, label), r)
                    results[label] = {"runs": runs, "single": single, "proc": None}
                    results[label]["port"] = proc.port
                    # The fixed-rate run happens below, once the peer's capacity is known.
                    results[label]["argv"] = argv
                finally:
                    proc.stop()
            ref = outputs["torch"]
            for label in ("weft batching", "weft no batching"):
                diff = float(np.abs(outputs[label] - ref).max())
                scale = float(np.abs(ref).max())
                log("%s: %s vs torch: max |diff| %.3g of max |torch| %.3g" % (model, label, diff, scale))
                if not diff <= 1e-3 * scale:
                    failed = True
                    log("%s: OUTPUTS DISAGREE" % model)
            # X: four times the peer's idle latency (its single-client median).
            bound = 4 * results["torch"]["single"]["p50"]

            def best(label):
                ok = [r["rps"] for r in results[label]["runs"] if r["p99"] <= bound]
                return max(ok) if ok else 0.0

            peer = best("torch")
            log("%s: p99 bound X = 4 x torch's single-client median = %.1f ms" % (model, bound))
            for label, mode in (("weft batching", "batching"), ("weft no batching", "nobatching")):
                w = best(label)
                print("compare serve_%s_saturation_%s weft=%.1f peer=%.1f ratio=%.3f  "
                      "# req/s at p99 <= %.0f ms; ratio = peer/weft" %
                      (model, mode, w, peer, peer / w if w else float("inf"), bound), flush=True)
            # Fixed rate: half the peer's capacity, paced by 4 connections.
            rate = 0.5 * max(peer, max(r["rps"] for r in results["torch"]["runs"]))
            fixed = {}
            for label, argv in servers:
                proc = Proc(argv, work, model + "-" + label.replace(" ", "_") + "-rate")
                try:
                    wrk(proc.port, path, body, 2, 1)
                    base = results[label]["single"]["p50"]
                    delay = max(0.0, 4 * 1000.0 / rate - base)
                    fixed[label] = wrk(proc.port, path, body, 4, seconds, delay)
                    show("%s %s at ~%.1f req/s" % (model, label, rate), fixed[label])
                finally:
                    proc.stop()
            for label, mode in (("weft batching", "batching"), ("weft no batching", "nobatching")):
                w, t = fixed[label]["p99"], fixed["torch"]["p99"]
                print("compare serve_%s_rate_%s_p99_ms weft=%.1f peer=%.1f ratio=%.3f  "
                      "# p99 at ~%.1f req/s offered; ratio = weft/peer" %
                      (model, mode, w, t, w / t, rate), flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
