#!/usr/bin/env python3
"""Writes seed inputs for the fuzz targets (tests/fuzz/run.sh calls it): .params files of every
record layout (FORMATS.md), .npy files, small graph JSON files whose variables carry __shape__,
byte programs for c_api_fuzz, and RecordIO streams and images for recordio_fuzz. Standard
library only.

    make_seeds.py OUT_DIR   # writes OUT_DIR/params, npy, graph, capi, serve and recordio
"""
import json
import os
import random
import struct
import sys
import zlib

MAGIC_V1, MAGIC_V2, MAGIC_V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
F32, F64, U8, I32, I8, I64 = 0, 1, 3, 4, 5, 6
SIZE = {F32: 4, F64: 8, U8: 1, I32: 4, I8: 1, I64: 8}
PACK = {F32: "f", F64: "d", U8: "B", I32: "i", I8: "b", I64: "q"}


def shape(dims):
    return struct.pack("<i", len(dims)) + b"".join(struct.pack("<q", d) for d in dims)


def values(flag, n, start=1):
    return b"".join(struct.pack("<" + PACK[flag], start + i) for i in range(n))


def prod(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def dense(dims, flag=F32, magic=MAGIC_V2):
    return struct.pack("<Ii", magic, 0) + shape(dims) + struct.pack("<iii", 1, 0, flag) + values(flag, prod(dims))


def v1(dims, flag=F32):
    return struct.pack("<I", MAGIC_V1) + shape(dims) + struct.pack("<iii", 1, 0, flag) + values(flag, prod(dims))


def legacy(dims, flag=F32):
    head = struct.pack("<I", len(dims)) + b"".join(struct.pack("<I", d) for d in dims)
    return head + struct.pack("<iii", 1, 0, flag) + values(flag, prod(dims))


def none_v2():
    return struct.pack("<Iii", MAGIC_V2, 0, 0)


def row_sparse(rows, width, stored, index_flag=I64):
    out = struct.pack("<Ii", MAGIC_V2, 1) + shape([len(stored), width]) + shape([rows, width])
    out += struct.pack("<iii", 1, 0, F32) + struct.pack("<i", index_flag) + shape([len(stored)])
    out += values(F32, len(stored) * width)
    out += b"".join(struct.pack("<" + PACK[index_flag], r) for r in stored)
    return out


def csr(rows, cols, entries, index_flag=I64):
    """entries: sorted (row, col) pairs."""
    indptr = [0] * (rows + 1)
    for r, _ in entries:
        indptr[r + 1] += 1
    for r in range(rows):
        indptr[r + 1] += indptr[r]
    out = struct.pack("<Ii", MAGIC_V2, 2) + shape([len(entries)]) + shape([rows, cols])
    out += struct.pack("<iii", 1, 0, F32)
    out += struct.pack("<i", index_flag) + shape([rows + 1]) + struct.pack("<i", index_flag) + shape([len(entries)])
    out += values(F32, len(entries))
    out += b"".join(struct.pack("<" + PACK[index_flag], p) for p in indptr)
    out += b"".join(struct.pack("<" + PACK[index_flag], c) for _, c in entries)
    return out


def params_file(records, names=None):
    out = struct.pack("<QQQ", 0x112, 0, len(records)) + b"".join(records)
    names = names or []
    out += struct.pack("<Q", len(names))
    for n in names:
        out += struct.pack("<Q", len(n)) + n.encode()
    return out


def params_seeds():
    return {
        "dict_v2": params_file([dense([2, 3]), dense([4], F64)], ["arg:fc_weight", "aux:bn_moving_mean"]),
        "list_v3_scalar": params_file([dense([], F32, MAGIC_V3), dense([3], I64, MAGIC_V3)]),
        "v1_and_legacy": params_file([v1([2, 2], I32), legacy([3], U8)]),
        "none": params_file([none_v2(), dense([1], I8)], ["a", "b"]),
        "row_sparse": params_file([row_sparse(5, 3, [1, 4])], ["arg:embed_weight"]),
        "row_sparse_i32": params_file([row_sparse(4, 2, [0, 3], I32)], ["r"]),
        "csr": params_file([csr(3, 4, [(0, 1), (2, 0), (2, 3)])], ["arg:w"]),
        "csr_i32": params_file([csr(2, 2, [(1, 1)], I32), dense([2])], ["c", "d"]),
        "mixed": params_file([row_sparse(3, 2, [2]), csr(2, 3, [(0, 2)]), dense([2, 2])]),
        # Empty sparse records declaring 1 GiB dense (121 bytes; LoadOptions::max_sparse_expansion_bytes),
        # and many smaller empty ones that only together pass the limit.
        "row_sparse_empty_1gib": params_file([row_sparse(1 << 28, 1, [])], ["arg:w"]),
        "csr_empty_1gib": params_file([csr(1, 1 << 28, [])], ["arg:c"]),
        "row_sparse_empty_many": params_file([row_sparse(1 << 24, 4, []) for _ in range(5)],
                                             ["r%d" % i for i in range(5)]),
    }


def npy(descr, dims, payload, fortran=False, version=1):
    dims_text = "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, "True" if fortran else "False", dims_text)
    prefix = 10 if version == 1 else 12
    header += " " * ((64 - (prefix + len(header) + 1) % 64) % 64) + "\n"
    length = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + length + header.encode() + payload


def npy_seeds():
    return {
        "f4_2x3": npy("<f4", [2, 3], values(F32, 6)),
        "f8_4": npy("<f8", [4], values(F64, 4)),
        "i8_scalar": npy("<i8", [], values(I64, 1)),
        "u1_fortran_1d": npy("|u1", [5], values(U8, 5), fortran=True),
        "b1_v2": npy("|b1", [3], bytes([1, 0, 1]), version=2),
        "i4_empty": npy("<i4", [0, 7], b""),
    }


def graph(nodes, heads):
    """nodes: (op, name, attrs, [input node indices]) in topological order."""
    out = {"nodes": [], "arg_nodes": [], "node_row_ptr": [], "heads": [[h, 0, 0] for h in heads],
           "attrs": {"mxnet_version": ["int", 10500]}}
    for i, (op, name, attrs, inputs) in enumerate(nodes):
        node = {"op": op, "name": name, "inputs": [[j, 0, 0] for j in inputs]}
        if attrs:
            node["attrs"] = attrs
        if op == "null":
            out["arg_nodes"].append(i)
        out["nodes"].append(node)
    out["node_row_ptr"] = list(range(len(nodes) + 1))
    return json.dumps(out, indent=2).encode()


def var(name, shape_text=None):
    return ("null", name, {"__shape__": shape_text} if shape_text else {}, [])


def entry_graph(input_index, head_node, head_index):
    """data -> relu reading output input_index of data; the head is (head_node, head_index)."""
    return json.dumps({"nodes": [{"op": "null", "name": "data", "inputs": []},
                                 {"op": "Activation", "name": "relu", "attrs": {"act_type": "relu"},
                                  "inputs": [[0, input_index, 0]]}],
                       "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[head_node, head_index, 0]],
                       "attrs": {"mxnet_version": ["int", 10500]}}).encode()


def hostile_graph_seeds():
    """Entry indices of 2^31 and 2^32 - 1 (inputs and heads), output counts past kMaxNodeOutputs."""
    seeds = {}
    for index in (2 ** 31, 2 ** 32 - 1):
        seeds["input_index_%d" % index] = entry_graph(index, 1, 0)
        seeds["head_index_%d" % index] = entry_graph(0, 1, index)
        seeds["var_head_index_%d" % index] = entry_graph(0, 0, index)
    for count in (2 ** 31 - 1, 2 ** 20, 4097, 4096):
        seeds["split_%d" % count] = graph([var("data", "(1, %d)" % count),
                                           ("SliceChannel", "split", {"num_outputs": str(count)}, [0])], [1])
    return seeds


def graph_seeds():
    return dict(hostile_graph_seeds(), **{
        "mlp": graph([var("data", "(0, 8)"), var("fc1_weight"), var("fc1_bias"),
                      ("FullyConnected", "fc1", {"num_hidden": "16"}, [0, 1, 2]),
                      ("Activation", "relu1", {"act_type": "relu"}, [3]), var("fc2_weight"), var("fc2_bias"),
                      ("FullyConnected", "fc2", {"num_hidden": "4"}, [4, 5, 6]),
                      ("softmax", "prob", {"axis": "-1"}, [7])], [8]),
        "conv_bn_pool": graph([var("data", "(1, 3, 8, 8)"), var("conv_weight"), var("conv_bias"),
                               ("Convolution", "conv", {"kernel": "(3, 3)", "num_filter": "4", "pad": "(1, 1)"},
                                [0, 1, 2]),
                               var("bn_gamma"), var("bn_beta"), var("bn_moving_mean"), var("bn_moving_var"),
                               ("BatchNorm", "bn", {"fix_gamma": "False"}, [3, 4, 5, 6, 7]),
                               ("Activation", "relu", {"act_type": "relu"}, [8]),
                               ("Pooling", "pool", {"kernel": "(2, 2)", "stride": "(2, 2)", "pool_type": "max"},
                                [9]),
                               ("Flatten", "flat", {}, [10])], [11]),
        "concat_reshape": graph([var("a", "(2, 3, 4)"), var("b", "(2, 5, 4)"),
                                 ("Concat", "cat", {"num_args": "2", "dim": "1"}, [0, 1]),
                                 ("Reshape", "reshape", {"shape": "(0, -1)"}, [2]),
                                 ("transpose", "t", {}, [3])], [4]),
        "slice_upsample": graph([var("data", "(1, 4, 3, 3)"),
                                 ("SliceChannel", "split", {"num_outputs": "2", "axis": "1"}, [0]),
                                 ("UpSampling", "up", {"scale": "2", "sample_type": "nearest", "num_args": "1"},
                                  [1])], [2]),
        "dot_elemwise": graph([var("x", "(3, 4)"), var("y", "(4, 5)"),
                               ("dot", "mm", {}, [0, 1]), ("_mul_scalar", "scale", {"scalar": "0.5"}, [2]),
                               ("exp", "e", {}, [3]), ("sum", "s", {"axis": "1"}, [4])], [5]),
        "creation": graph([("_zeros", "z", {"shape": "(2, 3)"}, []), ("_arange", "r", {"start": "0", "stop": "3"}, []),
                           ("broadcast_add", "add", {}, [0, 1])], [2]),
        "embedding": graph([var("data", "(2, 5)"), var("embed_weight", "(10, 4)"),
                            ("Embedding", "embed", {"input_dim": "10", "output_dim": "4"}, [0, 1]),
                            ("expand_dims", "ex", {"axis": "1"}, [2]), ("squeeze", "sq", {"axis": "(1,)"}, [3])],
                           [4]),
    })


def capi_seeds():
    """c_api_fuzz reads a call per step (its first byte, modulo 13, picks the subject; 12 uses
    freed handles again); a zero byte decodes as the plain, valid value of every argument.
    Seeds: each subject followed by zeros (one valid call, then valid array creations), and
    fixed pseudo-random programs."""
    seeds = {"call_%02d" % k: bytes([k]) + bytes(256) for k in range(13)}
    # A scalar float32 array (46 bytes), an operator registered with plain values (28 bytes),
    # then that operator invoked on the array (byte layout of c_api_fuzz.cc's do_invoke).
    zeros = bytes([0]) + bytes(45)
    register = bytes([6]) + bytes(27)
    invoke = bytes([3, 3, 0, 0, 1]) + bytes(8) + bytes([0, 0]) + bytes(8) + bytes(4)
    seeds["register_invoke"] = zeros + register + invoke + bytes([7]) + bytes(16)
    # An array made, freed (array query 10 on it), then used and freed again (stale, 12).
    seeds["free_then_stale"] = zeros + bytes([2, 0, 10]) + bytes([12, 0, 0]) + bytes([12, 1, 0]) + bytes(16)
    rng = random.Random(12)
    for i in range(8):
        seeds["random_%d" % i] = bytes(rng.randrange(256) for _ in range(rng.randrange(64, 1024)))
    return seeds


def serve_seeds():
    """serve_body_fuzz reads a form byte (0 .npy, 1 multipart with boundary "fuzzboundary",
    2 JSON), then the body."""
    f4 = npy("<f4", [2, 3], values(F32, 6))
    part = (b"--fuzzboundary\r\nContent-Disposition: form-data; name=\"data\"\r\n"
            b"Content-Type: application/x-npy\r\n\r\n" + f4 + b"\r\n")
    return {
        "npy_f4": bytes([0]) + f4,
        "npy_f8": bytes([0]) + npy("<f8", [4], values(F64, 4)),
        "multipart_one": bytes([1]) + part + b"--fuzzboundary--\r\n",
        "multipart_two": bytes([1]) + part + part.replace(b"data", b"mask") + b"--fuzzboundary--\r\n",
        "json_2x3": bytes([2]) + b"[[1, 2.5, -3], [4, 5, 6e-3]]",
        "json_nested": bytes([2]) + b"[[[1], [2]], [[3], [4]]]",
    }


# 8 x 8 JPEGs written by libjpeg-turbo (quality 50): baseline RGB, progressive RGB, baseline grey.
JPEG_RGB = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a1816"
    "16183123251d283a333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c6567"
    "63ffdb0043011112121815182f1a1a2f63423842636363636363636363636363636363636363636363636363"
    "6363636363636363636363636363636363636363636363636363ffc000110800080008030122000211010311"
    "01ffc40014000100000000000000000000000000000000ffc4001d1000010402030000000000000000000000"
    "010003041102211333b1ffc4001501010100000000000000000000000000000205ffc4001c11000103050000"
    "000000000000000000000100020403112151d1ffda000c03010002110311003f0034cf5470dd01c11f227763"
    "6edf811114f993aa4720300ceefd4034397fffd9")
JPEG_PROGRESSIVE = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a1816"
    "16183123251d283a333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c6567"
    "63ffdb0043011112121815182f1a1a2f63423842636363636363636363636363636363636363636363636363"
    "6363636363636363636363636363636363636363636363636363ffc200110800080008030122000211010311"
    "01ffc40014000100000000000000000000000000000000ffc400150101010000000000000000000000000000"
    "0204ffda000c0301000210031000000109cfffc4001510010100000000000000000000000000000100ffda00"
    "080101000105020bffc4001511010100000000000000000000000000001100ffda0008010301013f011bffc4"
    "0017110100030000000000000000000000000003000231ffda0008010201013f0167b1e4ffc4001910000105"
    "000000000000000000000000000200011151c1ffda0008010100063f02618a1d5fffc4001510010100000000"
    "000000000000000000000091ffda0008010100013f21a88fffda000c0301000200030000001007ffc4001511"
    "010100000000000000000000000000000100ffda0008010301013f1004ffc400191101000203000000000000"
    "0000000000000100112151d1ffda0008010201013f1040099ddf67ffc4001910000300030000000000000000"
    "000000000111210031b1ffda0008010100013f10d5200e1ac57e0cffd9")
JPEG_GREY = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e1211101318281a1816"
    "16183123251d283a333d3c3933383740485c4e404457453738506d51575f626768673e4d71797064785c6567"
    "63ffc0000b080008000801011100ffc40014000100000000000000000000000000000001ffc4001e10000201"
    "030500000000000000000000000103020511120004317191ffda0008010100003f00698b4d12972deb979e36"
    "10582019c8f005fde813afffd9")


def png(width, height, depth, color_type, rows, plte=b"", trns=b""):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, 0))
    if plte:
        out += chunk(b"PLTE", plte)
    if trns:
        out += chunk(b"tRNS", trns)
    out += chunk(b"IDAT", zlib.compress(b"".join(b"\x00" + row for row in rows)))
    return out + chunk(b"IEND", b"")


def recordio_part(cflag, payload, length=None):
    length = len(payload) if length is None else length
    return struct.pack("<II", 0xced7230a, cflag << 29 | length) + payload + b"\x00" * (-len(payload) % 4)


def recordio_seeds():
    """recordio_fuzz reads a mode byte (0 a RecordIO stream, 1 .idx text, 2 an image after a
    channels byte), then the input."""
    image_header = struct.pack("<IfQQ", 0, 3.0, 7, 0)
    labels_header = struct.pack("<IfQQ", 2, 0.0, 8, 0) + struct.pack("<ff", 1.5, -2.0)
    return {
        "rec_whole": b"\x00" + recordio_part(0, b"abc") + recordio_part(0, b"") + recordio_part(0, b"0123"),
        "rec_parts": b"\x00" + recordio_part(1, b"abcd") + recordio_part(2, b"") + recordio_part(3, b"xyz"),
        "rec_image": b"\x00" + recordio_part(0, image_header + JPEG_GREY[:40]) + recordio_part(0, labels_header + b"PNG"),
        "idx": b"\x01" + b"0\t0\n1\t12\n2\t24\r\n",
        "jpeg_rgb": b"\x02\x03" + JPEG_RGB,
        "jpeg_progressive": b"\x02\x00" + JPEG_PROGRESSIVE,
        "jpeg_grey": b"\x02\x01" + JPEG_GREY,
        "png_rgb": b"\x02\x03" + png(3, 2, 8, 2, [bytes(range(9)), bytes(range(9, 18))]),
        "png_palette": b"\x02\x03" + png(3, 1, 8, 3, [b"\x02\x00\x01"], b"\xff\x00\x00\x00\xff\x00\x00\x00\xff", b"\x00\x80"),
        "png_grey16": b"\x02\x01" + png(2, 1, 16, 0, [b"\x12\x34\xab\xcd"]),
        "png_grey2": b"\x02\x00" + png(4, 1, 2, 0, [b"\x1b"]),
        "png_rgba": b"\x02\x03" + png(1, 2, 8, 6, [b"\x01\x02\x03\x04", b"\x05\x06\x07\x08"]),
    }


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for kind, seeds in (("params", params_seeds()), ("npy", npy_seeds()), ("graph", graph_seeds()),
                          ("capi", capi_seeds()), ("serve", serve_seeds()), ("recordio", recordio_seeds())):
        directory = os.path.join(sys.argv[1], kind)
        os.makedirs(directory, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(directory, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
