#!/usr/bin/env python3
"""The peer of `weft serve` in bench/serve/run.sh: PyTorch (Debian's python3-torch 1.13) serving
the same MXNet graph with the same weights over HTTP.

    torch_server.py --graph G-symbol.json --params P.params --name NAME --shape 3x224x224
                    [--port 0] [--port-file F] [--threads 2]

POST /v1/models/NAME/infer takes an application/x-npy body (float32, batch first) and answers
application/x-npy (the first head); GET /v1/health answers 200. The module is built from the
graph JSON by bench/replay/mxnet_to_torch.py (the replay benchmark's converter), then put in its
fastest compiled form for batch 1 exactly as torch_replay.py --mode auto chooses it
(torch.jit.trace + freeze, optimize_for_inference, channels-last; the detail line names the one
kept); other batch sizes run the eager module.

Why this server: TorchServe needs a Java runtime, which the benchmark machines do not have, so the
peer is the minimal server the benchmark's issue allows. It is the standard library's
ThreadingHTTPServer (HTTP/1.1 keep-alive, a thread per connection) with one model instance behind
a lock, so one inference runs at a time with PyTorch's `--threads` intra-op threads: on this
2-core machine two concurrent 2-thread inferences only contend. (The request parsing runs in the
connection threads and overlaps with inference; torch releases the GIL while it computes.)
"""
import argparse
import http.server
import io
import os
import socket
import sys
import threading
import time

import numpy as np

# PyTorch's OpenMP threads spin while they wait for work by default; beside the server's
# connection threads on 2 cores that halves its throughput with two clients (10 -> 15 req/s on
# ResNet-18 with passive waiting). Set before torch loads OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "replay"))
import mxnet_to_torch as m2t  # noqa: E402
import torch_replay as tr  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graph", required=True)
    p.add_argument("--params", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--shape", required=True, help="one row's shape, e.g. 3x224x224")
    p.add_argument("--input", default="data")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    graph = m2t.load_graph(args.graph)
    params = dict(m2t.load_params(args.params))
    row = tuple(int(d) for d in args.shape.split("x"))
    factory = lambda: m2t.MXNetGraphModule(graph, params, [args.input]).eval()  # noqa: E731
    eager = factory()
    fast, xs, label = tr.choose(factory, (torch.zeros((1,) + row),), 3)
    channels_last = "channels_last" in label
    sys.stderr.write("# torch_server: %s, batch 1 as %s, %d threads\n" %
                     (args.name, label, args.threads))
    lock = threading.Lock()
    path = "/v1/models/%s/infer" % args.name

    def infer(x):
        with lock, torch.inference_mode():
            t = torch.from_numpy(x)
            if x.shape[0] == 1 and x.shape[1:] == row:
                if channels_last:
                    t = t.contiguous(memory_format=torch.channels_last)
                out = fast(t)
            else:
                out = eager(t)
            out = out[0] if isinstance(out, (tuple, list)) else out
            return out.contiguous().numpy()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def setup(self):
            super().setup()
            # Without this, a response written in two sends meets the client's delayed ACK
            # (Nagle): about 40 ms added to every keep-alive request.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def reply(self, code, body, ctype):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            # Headers and body in one write.
            self._headers_buffer.append(b"\r\n")
            self._headers_buffer.append(body)
            self.wfile.write(b"".join(self._headers_buffer))
            self._headers_buffer = []

        def do_GET(self):
            if self.path == "/v1/health":
                return self.reply(200, b'{"status": "ok"}', "application/json")
            self.reply(404, b'{"error": "no route"}', "application/json")

        def do_POST(self):
            n = int(self.headers.get("Content-Length", 0))
            body = self.rfile.read(n)
            if self.path != path:
                return self.reply(404, b'{"error": "no model"}', "application/json")
            try:
                x = np.load(io.BytesIO(body), allow_pickle=False)
                y = infer(np.ascontiguousarray(x, dtype=np.float32))
            except Exception as e:  # noqa: BLE001 - a bad request must not stop the server
                return self.reply(400, ('{"error": %r}' % str(e)).encode(), "application/json")
            out = io.BytesIO()
            np.save(out, y)
            self.reply(200, out.getvalue(), "application/x-npy")

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 256

    server = Server(("127.0.0.1", args.port), Handler)
    port = server.server_address[1]
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.replace(args.port_file + ".tmp", args.port_file)
    print("serve listening on http://127.0.0.1:%d (torch %s)" % (port, torch.__version__), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
