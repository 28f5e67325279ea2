"""weft.data's file formats and images: .npy shards, RecordIO written with RecordIOWriter and read
back exactly, corrupt records (DataError, or skipped and counted), image folders, the image codecs
and transforms against NumPy, and the example pipeline run end to end."""
import os
import pathlib
import re
import struct
import subprocess
import sys

import numpy as np
import pytest

import weft
import weft.data as wd

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "python" / "data_pipeline.py"


# ---- .npy files ----------------------------------------------------------------------------------

def test_npy_files_reads_shards_in_order_zero_copy(tmp_path, rng):
    xs = [rng.standard_normal((n, 4)).astype(np.float32) for n in (3, 5)]
    ys = [np.arange(n, dtype=np.int64) + 10 * k for k, n in enumerate((3, 5))]
    shards = []
    for k in range(2):
        np.save(tmp_path / f"x{k}.npy", xs[k])
        np.save(tmp_path / f"y{k}.npy", ys[k])
        shards.append((tmp_path / f"x{k}.npy", tmp_path / f"y{k}.npy"))
    ds = wd.npy_files(shards)
    assert ds.cardinality() == 8
    out = list(ds.as_numpy_iterator())
    np.testing.assert_array_equal(np.stack([a for a, _ in out]), np.concatenate(xs))
    np.testing.assert_array_equal([b for _, b in out], np.concatenate(ys))
    # One file per shard gives one component.
    assert len(list(wd.npy_files([tmp_path / "x0.npy"]))) == 3


# ---- image transforms against NumPy --------------------------------------------------------------

def test_image_transforms_match_numpy(rng):
    img = rng.integers(0, 256, (9, 12, 3)).astype(np.uint8)
    np.testing.assert_array_equal(wd.center_crop(5, 6)(img).asnumpy(), img[2:7, 3:9])
    np.testing.assert_array_equal(wd.random_flip_left_right(1.0)(img).asnumpy(), img[:, ::-1])
    np.testing.assert_array_equal(wd.random_flip_left_right(0.0)(img).asnumpy(), img)
    chw = wd.to_tensor()(img).asnumpy()
    np.testing.assert_allclose(chw, img.transpose(2, 0, 1).astype(np.float32) / 255, rtol=1e-6)
    mean, std = [0.1, 0.2, 0.3], [0.5, 0.25, 2.0]
    norm = wd.normalize(mean, std)(chw).asnumpy()
    ref = (chw - np.array(mean, np.float32)[:, None, None]) / np.array(std, np.float32)[:, None,
                                                                                          None]
    np.testing.assert_allclose(norm, ref, rtol=1e-5, atol=1e-6)
    # A random crop is one of the image's windows.
    for seed in range(5):
        crop = wd.random_crop(4, 5)(img, seed=seed).asnumpy()
        windows = [(y, x) for y in range(6) for x in range(8)
                   if np.array_equal(img[y:y + 4, x:x + 5], crop)]
        assert windows, seed
    # Resizing keeps a constant image constant and gives the asked size.
    flat = np.full((7, 9, 3), 77, np.uint8)
    np.testing.assert_array_equal(wd.resize(4, 5)(flat).asnumpy(), np.full((4, 5, 3), 77))
    # compose applies in order, and Python functions mix in.
    both = wd.compose(wd.center_crop(5, 6), lambda x: x.asnumpy()[::-1].copy())
    np.testing.assert_array_equal(both(img).asnumpy(), img[2:7, 3:9][::-1])
    assert both.uses_python and not wd.center_crop(5, 6).uses_python
    # Component selects the array transformed.
    out = wd.center_crop(5, 6, component=1)(np.int64(3), img)
    assert out[0].item() == 3 and tuple(out[1].shape) == (5, 6, 3)


def test_png_and_jpeg_codecs_round_trip(rng):
    img = rng.integers(0, 256, (10, 14, 3)).astype(np.uint8)
    png = wd.encode_png(img)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    np.testing.assert_array_equal(wd.decode_image_bytes(png).asnumpy(), img)
    smooth = np.repeat(np.repeat(np.linspace(0, 255, 16, dtype=np.uint8)[None, :, None], 16, 0),
                       3, 2)
    jpg = wd.encode_jpeg(weft.array(smooth, dtype="uint8"), quality=95)
    assert jpg[:2] == b"\xff\xd8"
    back = wd.decode_image_bytes(jpg, channels=3).asnumpy()
    assert back.shape == smooth.shape and np.abs(back.astype(int) - smooth).mean() < 4
    grey = wd.decode_image_bytes(png, channels=1).asnumpy()
    assert grey.shape == (10, 14, 1)


def test_image_folder_lists_classes_and_decodes_in_a_map(tmp_path, rng):
    images = {}
    for cls in ("dog", "cat"):
        (tmp_path / cls).mkdir()
        for k in range(3):
            img = rng.integers(0, 256, (6 + k, 8, 3)).astype(np.uint8)
            (tmp_path / cls / f"{k}.png").write_bytes(wd.encode_png(img))
            images[(cls, k)] = img
    (tmp_path / "cat" / "notes.txt").write_text("not an image")
    assert wd.image_folder_classes(tmp_path) == ["cat", "dog"]
    ds = wd.image_folder(tmp_path)
    raw = list(ds.as_numpy_iterator())
    assert len(raw) == 6 and [int(label) for _, label in raw] == [0, 0, 0, 1, 1, 1]
    assert raw[0][0].dtype == np.uint8
    assert raw[0][0].tobytes() == (tmp_path / "cat" / "0.png").read_bytes()
    decoded = list(ds.map(wd.decode_image(), 3).as_numpy_iterator())
    for (img, label), (cls, k) in zip(decoded, [(c, k) for c in ("cat", "dog") for k in range(3)]):
        np.testing.assert_array_equal(img, images[(cls, k)])


# ---- RecordIO ------------------------------------------------------------------------------------

def write_records(path, records, idx=True):
    idx_path = str(path) + ".idx" if idx else None
    with wd.RecordIOWriter(path, idx_path) as w:
        for r in records:
            w.write(r)
    return idx_path


def test_recordio_round_trips_records_exactly(tmp_path, rng):
    records = [bytes(rng.integers(0, 256, n).astype(np.uint8)) for n in (0, 1, 3, 4, 7, 100, 33)]
    records.append(struct.pack("<I", 0xced7230a) * 3)  # the magic inside a record's payload
    rec = tmp_path / "data.rec"
    idx = write_records(rec, records)
    for ds in (wd.recordio(rec, idx), wd.recordio(rec)):
        got = [r.tobytes() for r in ds.as_numpy_iterator()]
        assert got == records
    assert wd.recordio(rec, idx).cardinality() == len(records)
    assert wd.recordio(rec).cardinality() == wd.UNKNOWN
    # Image records: the header's labels and the image bytes.
    img_rec = tmp_path / "images.rec"
    pngs = [wd.encode_png(rng.integers(0, 256, (4, 5, 3)).astype(np.uint8)) for _ in range(3)]
    labels = [3.0, [1.0, 2.5], 7.0]
    with wd.RecordIOWriter(img_rec, str(img_rec) + ".idx") as w:
        for png, label in zip(pngs, labels):
            w.write_image(png, label)
    got = list(wd.recordio(img_rec, str(img_rec) + ".idx", image_records=True)
               .as_numpy_iterator())
    assert [g[0].tobytes() for g in got] == pngs
    assert [list(g[1]) for g in got] == [[3.0], [1.0, 2.5], [7.0]]
    assert all(g[1].dtype == np.float32 for g in got)


def test_corrupt_record_raises_data_error_or_is_skipped_and_counted(tmp_path):
    records = [bytes([i]) * (5 + i) for i in range(5)]
    rec = tmp_path / "bad.rec"
    idx = write_records(rec, records)
    offsets = [int(line.split("\t")[1]) for line in open(idx).read().splitlines()]
    raw = bytearray(rec.read_bytes())
    raw[offsets[2]:offsets[2] + 4] = b"\0\0\0\0"  # record 2's magic
    rec.write_bytes(bytes(raw))
    it = wd.recordio(rec, idx).iterate()
    assert [next(it).asnumpy().tobytes() for _ in range(2)] == records[:2]
    with pytest.raises(wd.DataError) as e:
        next(it)
    assert isinstance(e.value, ValueError)
    assert e.value.index == 2 and "record 2" in e.value.origin and "bad.rec" in str(e.value)
    assert [r.asnumpy().tobytes() for r in it] == records[3:]  # indexed: reading goes on
    it = wd.recordio(rec, idx).ignore_errors().iterate()
    assert [r.asnumpy().tobytes() for r in it] == records[:2] + records[3:]
    assert it.stats().skipped_errors == 1
    # A corrupt image in a decode map: skipped and counted the same way.
    pngs = [wd.encode_png(np.full((3, 3, 3), i, np.uint8)) for i in range(4)]
    pngs[1] = b"not an image at all"
    ds = wd.from_generator(lambda: (np.frombuffer(p, np.uint8) for p in pngs))
    with pytest.raises(wd.DataError, match="element 1"):
        list(ds.map(wd.decode_image()))
    it = ds.map(wd.decode_image()).ignore_errors().prefetch(2).iterate()
    assert [int(x.asnumpy()[0, 0, 0]) for x in it] == [0, 2, 3]
    assert it.stats().skipped_errors == 1


# ---- the example -------------------------------------------------------------------------------

def test_the_example_runs(tmp_path):
    out = subprocess.run([sys.executable, str(EXAMPLE), "--images", "24", "--epochs", "2"],
                         cwd=tmp_path, env=dict(os.environ), capture_output=True, text=True,
                         timeout=300, check=True)
    epochs = re.findall(r"epoch \d: (\d+) batches .* samples/s.* for (\d+)/(\d+) images",
                        out.stdout)
    assert epochs == [("3", "24", "24")] * 2, out.stdout + out.stderr
    assert "3/3" in out.stderr  # the progress bar
