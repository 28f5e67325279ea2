"""Cases for the image operators (mx.nd.image): to_tensor, normalize, the flips, crop and resize.

MXNet registers them as `_image_*` and exposes them as mx.nd.image.<name>, so every case calls
that function. Gradients are compared where MXNet's are right (normalize, crop); MXNet gives the
flips, to_tensor and resize a plain copy of the output gradient (`_copy`), which is not their
gradient, so those cases are forward only.
"""
from __future__ import annotations

import numpy as np

# bilinear resize of uint8 images: weft follows the fixed-point arithmetic of OpenCV's SIMD code
# and matches MXNet exactly here; the contract (ops/cpu/image_resize.cc) is "within 1"
UINT8_RESIZE_TOL = (0.0, 1.0)
FLOAT_RESIZE_TOL = (1e-5, 1e-5)


def image_fn(name):
    """MXNet's mx.nd.image.<name> (the registry's _image_<name>)."""
    def call(*args, **attrs):
        import mxnet as mx
        return getattr(mx.nd.image, name)(*args, **attrs)
    return call


def pixels(b, *shape):
    return b.rng.integers(0, 256, size=shape).astype(np.uint8)


def add_to_tensor(b):
    fn = image_fn("to_tensor")
    for shape in ((5, 7, 3), (4, 6, 1), (2, 3, 5, 3)):
        b.add("_image_to_tensor", f"uint8{shape}", [pixels(b, *shape)], mx_call=fn)
    b.add("_image_to_tensor", "float32", [b.u(4, 5, 3, low=0, high=255)], backward=False, mx_call=fn)


def add_normalize(b):
    fn = image_fn("normalize")
    b.add("_image_normalize", "3ch", [b.u(3, 5, 7, low=0, high=1)],
          {"mean": "(0.485, 0.456, 0.406)", "std": "(0.229, 0.224, 0.225)"}, mx_call=fn)
    b.add("_image_normalize", "batch", [b.u(2, 3, 4, 5)], {"mean": "(0.1, -0.2, 0.3)", "std": "(2, 0.5, 1.5)"},
          mx_call=fn)
    b.add("_image_normalize", "one_value", [b.u(3, 4, 4)], {"mean": "(0.5,)", "std": "(0.25,)"}, mx_call=fn)
    b.add("_image_normalize", "1ch", [b.u(1, 6, 5)], {"mean": "(0.3,)", "std": "(0.7,)"}, mx_call=fn)
    b.add("_image_normalize", "1ch_batch", [b.u(2, 1, 3, 3)], {"mean": "(-1,)", "std": "(3,)"}, mx_call=fn)


def flip_check(axis):
    """Random flips: the output is the input or its mirror image."""
    def check(case, outs, grads):
        x, y = case.inputs[0], outs[0]
        if y is None or y.shape != x.shape:
            return f"output shape {None if y is None else y.shape}, expected {x.shape}"
        if not (np.array_equal(y, x) or np.array_equal(y, np.flip(x, axis))):
            return "the output is neither the input nor its mirror image"
        return ""
    return check


def add_flips(b):
    for name, axis in (("flip_left_right", 1), ("flip_top_bottom", 0)):
        fn = image_fn(name)
        op = "_image_" + name
        # even sizes along the flipped axis: MXNet 1.9.1 leaves the middle row or column of an odd
        # size unwritten when the output is a new array, so odd sizes are checked against numpy
        for shape in ((4, 6, 3), (6, 4, 1)):
            b.add(op, f"uint8{shape}", [pixels(b, *shape)], mx_call=fn)
            b.add(op, f"float32{shape}", [b.u(*shape)], backward=False, mx_call=fn)
        b.add(op, "odd_size", [pixels(b, 5, 7, 3)], backward=False,
              reference=lambda inputs, axis=axis: [np.flip(inputs[0], axis)])
        rop = "_image_random_" + name
        for k in range(4):
            b.add(rop, f"draw{k}", [pixels(b, 4, 6, 3)], mx_call=image_fn("random_" + name),
                  skip_compare=("out0",), check=flip_check(axis))


def add_crop(b):
    fn = image_fn("crop")
    window = {"x": 2, "y": 1, "width": 4, "height": 3}
    b.add("_image_crop", "uint8", [pixels(b, 6, 7, 3)], window, mx_call=fn)
    b.add("_image_crop", "float32", [b.u(5, 8, 3)], window, mx_call=fn)
    b.add("_image_crop", "batch_1ch", [b.u(2, 4, 6, 1)], window, mx_call=fn)
    b.add("_image_crop", "whole", [pixels(b, 3, 4, 3)], {"x": 0, "y": 0, "width": 4, "height": 3}, mx_call=fn)
    b.add("_image_crop", "corner", [b.u(5, 5, 3)], {"x": 4, "y": 4, "width": 1, "height": 1}, mx_call=fn)


def add_resize(b):
    fn = image_fn("resize")
    shapes = (((5, 7, 3), "(13, 9)"),   # up, odd sizes
              ((13, 11, 1), "(6, 4)"),  # down, non-integer ratios
              ((6, 8, 3), "(4, 3)"),    # exactly half: OpenCV's area path
              ((7, 5, 3), "(5, 7)"),    # the same size
              ((1, 1, 3), "(4, 3)"),    # one pixel
              ((4, 9, 3), "(3, 11)"),   # up in height, down in width
              ((31, 17, 3), "(5, 64)"),
              ((2, 5, 6, 3), "(9, 4)"))  # a batch
    for shape, size in shapes:
        b.add("_image_resize", f"uint8{shape}->{size}", [pixels(b, *shape)], {"size": size},
              tol=UINT8_RESIZE_TOL, mx_call=fn)
        b.add("_image_resize", f"float32{shape}->{size}", [b.u(*shape, low=0, high=1)], {"size": size},
              backward=False, tol=FLOAT_RESIZE_TOL, mx_call=fn)
    b.add("_image_resize", "square_size", [pixels(b, 6, 9, 3)], {"size": 5}, tol=UINT8_RESIZE_TOL, mx_call=fn)
    for shape in ((10, 20, 3), (20, 10, 3), (7, 5, 1), (2, 9, 6, 3)):
        b.add("_image_resize", f"keep_ratio{shape}", [pixels(b, *shape)], {"size": 4, "keep_ratio": True},
              tol=UINT8_RESIZE_TOL, mx_call=fn)
    for shape, size in (((6, 8, 3), "(4, 3)"), ((4, 5, 1), "(10, 8)"), ((5, 7, 3), "(3, 9)")):
        b.add("_image_resize", f"nearest{shape}->{size}", [pixels(b, *shape)], {"size": size, "interp": 0},
              mx_call=fn)
        b.add("_image_resize", f"nearest_float32{shape}->{size}", [b.u(*shape)],
              {"size": size, "interp": 0}, backward=False, mx_call=fn)


def add_cases(b):
    add_to_tensor(b)
    add_normalize(b)
    add_flips(b)
    add_crop(b)
    add_resize(b)
