#!/usr/bin/env python3
"""weft's RecordIO reader and writer and its image decoder against MXNet 1.9.1, in both
directions. Run with the MXNet venv's Python (tests/mxnet/run.sh does):

    recordio_check.py --tests BUILD/tests/weft_data_tests --out DIR

1. weft writes weft.rec/.idx (plain records, including ones MXNet's writer must split at the
   magic word) and weft_img.rec/.idx (image records: IRHeader, labels, JPEG/PNG bytes encoded by
   weft), plus records.tsv describing them (GoogleTest RecordIOMXNet.WeftWritesFilesForMXNet).
2. This script reads weft's files with mx.recordio (MXIndexedRecordIO, unpack) and checks every
   record, key, header and label; writes the same records with MXNet (write_idx, pack) into
   mxnet.rec/.idx and mxnet_img.rec/.idx; and decodes each image with mx.image.imdecode (RGB)
   into decoded_<i>.bin, listed in decoded.tsv.
3. weft reads MXNet's files, checks they are byte-identical to its own, that both reading modes
   give the records, and compares its decoder with MXNet's pixels (GoogleTest
   RecordIOMXNet.WeftReadsFilesMXNetWrote).

Exit status: 0 when every check passes, 1 otherwise.
"""
import argparse
import os
import subprocess
import sys

import mxnet as mx
import numpy as np


def run_gtest(tests, out, name):
    """Runs one RecordIOMXNet test of weft_data_tests with the exchange folder; True if it passed
    (and was not skipped)."""
    env = dict(os.environ, WEFT_MXNET_RECORDIO_DIR=out)
    result = subprocess.run([tests, "--gtest_filter=RecordIOMXNet." + name], env=env,
                            capture_output=True, text=True, timeout=300)
    passed = result.returncode == 0 and "[  PASSED  ] 1 test." in result.stdout \
        and "SKIPPED" not in result.stdout
    if not passed:
        print(result.stdout[-4000:], result.stderr[-2000:], sep="\n")
    for line in result.stdout.splitlines():
        if "max |weft - MXNet|" in line:
            print("recordio: decoded " + line)
    print("recordio: weft %s: %s" % (name, "ok" if passed else "FAILED"))
    return passed


def parse_records(path):
    """records.tsv: 'plain<TAB>key<TAB>hex' and 'image<TAB>key<TAB>labels<TAB>hex<TAB>kind'."""
    plain, images = [], []
    with open(path) as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "plain":
                plain.append((int(fields[1]), bytes.fromhex(fields[2])))
            elif fields[0] == "image":
                labels = [float(np.float32(v)) for v in fields[2].split(",")]
                images.append((int(fields[1]), labels, bytes.fromhex(fields[3]), fields[4]))
    return plain, images


class Checker:
    def __init__(self):
        self.failures = []

    def expect(self, ok, message):
        if not ok:
            self.failures.append(message)
            print("recordio: MISMATCH: " + message)


def as_bytes(record):
    # MXNet's read() returns None for an empty record (its ctypes buffer is falsy).
    return b"" if record is None else record


def check_weft_files(out, plain, images, check):
    rec = mx.recordio.MXIndexedRecordIO(os.path.join(out, "weft.idx"),
                                        os.path.join(out, "weft.rec"), "r")
    check.expect(rec.keys == [key for key, _ in plain],
                 "weft.idx keys %s, expected %s" % (rec.keys, [k for k, _ in plain]))
    for key, payload in plain:
        got = as_bytes(rec.read_idx(key))
        check.expect(got == payload, "weft.rec key %d: %d bytes read, %d written"
                     % (key, len(got), len(payload)))
    rec.close()
    seq = mx.recordio.MXRecordIO(os.path.join(out, "weft.rec"), "r")
    for key, payload in plain:
        check.expect(as_bytes(seq.read()) == payload, "weft.rec read in order: key %d differs" % key)
    check.expect(seq.read() is None, "weft.rec has records after the last one")
    seq.close()

    rec = mx.recordio.MXIndexedRecordIO(os.path.join(out, "weft_img.idx"),
                                        os.path.join(out, "weft_img.rec"), "r")
    check.expect(rec.keys == [key for key, _, _, _ in images], "weft_img.idx keys %s" % rec.keys)
    for key, labels, image, _ in images:
        header, data = mx.recordio.unpack(rec.read_idx(key))
        check.expect(header.id == key and header.id2 == 0,
                     "weft_img key %d: header id %d id2 %d" % (key, header.id, header.id2))
        if len(labels) == 1:
            check.expect(header.flag == 0 and float(header.label) == labels[0],
                         "weft_img key %d: flag %d label %r, expected 0 and %r"
                         % (key, header.flag, header.label, labels[0]))
        else:
            check.expect(header.flag == len(labels) and
                         np.array_equal(header.label, np.array(labels, np.float32)),
                         "weft_img key %d: flag %d labels %r, expected %r"
                         % (key, header.flag, header.label, labels))
        check.expect(data == image, "weft_img key %d: image bytes differ" % key)
    rec.close()


def write_mxnet_files(out, plain, images):
    rec = mx.recordio.MXIndexedRecordIO(os.path.join(out, "mxnet.idx"),
                                        os.path.join(out, "mxnet.rec"), "w")
    for key, payload in plain:
        rec.write_idx(key, payload)
    rec.close()
    rec = mx.recordio.MXIndexedRecordIO(os.path.join(out, "mxnet_img.idx"),
                                        os.path.join(out, "mxnet_img.rec"), "w")
    for key, labels, image, _ in images:
        label = labels[0] if len(labels) == 1 else labels
        rec.write_idx(key, mx.recordio.pack(mx.recordio.IRHeader(0, label, key, 0), image))
    rec.close()


def decode_with_mxnet(out, images):
    with open(os.path.join(out, "decoded.tsv"), "w") as tsv:
        for i, (_, _, image, _) in enumerate(images):
            pixels = mx.image.imdecode(image, flag=1, to_rgb=True).asnumpy()
            name = "decoded_%d.bin" % i
            with open(os.path.join(out, name), "wb") as f:
                f.write(np.ascontiguousarray(pixels, np.uint8).tobytes())
            h, w, c = pixels.shape
            tsv.write("%d\t%d\t%d\t%d\t%s\n" % (i, h, w, c, name))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tests", required=True, help="the weft_data_tests binary")
    parser.add_argument("--out", required=True, help="folder for the exchanged files")
    args = parser.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        os.remove(os.path.join(out, name))
    print("recordio: MXNet %s, exchanging files in %s" % (mx.__version__, out))

    if not run_gtest(args.tests, out, "WeftWritesFilesForMXNet"):
        return 1
    plain, images = parse_records(os.path.join(out, "records.tsv"))
    check = Checker()
    check_weft_files(out, plain, images, check)
    print("recordio: MXNet read weft's %d records and %d image records: %s"
          % (len(plain), len(images), "ok" if not check.failures else "FAILED"))
    write_mxnet_files(out, plain, images)
    decode_with_mxnet(out, images)
    ok = run_gtest(args.tests, out, "WeftReadsFilesMXNetWrote") and not check.failures
    print("recordio: %s" % ("all checks passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
