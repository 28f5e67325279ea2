"""Cases for shape and copy operators: Reshape, Flatten, transpose, slicing, concatenation,
splitting, broadcasting, Crop, and the gradient-routing ops BlockGrad and MakeLoss."""
from __future__ import annotations

import numpy as np

from cases_common import tup

# (input shape, shape attr, reverse); MXNet's special codes 0, -1, -2, -3, -4.
RESHAPES = [
    ((2, 3, 4), (0, -1), False),
    ((2, 3, 4), (-1,), False),
    ((2, 3, 4), (-2,), False),
    ((2, 3, 4), (2, -2), False),
    ((2, 3, 4), (-3, 0), False),
    ((2, 3, 4, 5), (0, -3, 0), False),
    ((2, 3, 4), (-4, 1, 2, -2), False),
    ((4, 3, 5), (-4, -1, 2, 0, 0), False),
    ((2, 4, 3, 5), (0, 2, -1, 0), False),  # RetinaFace
    ((40, 6), (-4, 20, -1, 0), False),  # CRNN
    ((2, 256), (-1, 256, 1, 1), False),  # SE block
    ((10, 5, 4), (-1, 0), True),
    ((2, 3, 4), (0, 0, 2, 2), False),
    ((6, 4), (3, -1, 0), True),
    ((2, 3, 4, 5), (-3, -2), False),
    ((2, 3, 4), (-2, 1), False),
]
def add_reshapes(b):
    for shape, target, reverse in RESHAPES:
        attrs = {"shape": tup(target)}
        if reverse:
            attrs["reverse"] = True
        b.add("Reshape", f"{shape}->{tup(target)}{'_rev' if reverse else ''}", [b.u(*shape)], attrs)
    # (-3, -1): the slot happens to be right in MXNet too
    b.add("Reshape", "(2, 3, 4, 5)->(-3, -1)", [b.u(2, 3, 4, 5)], {"shape": "(-3, -1)"})
    # MXNet puts the inferred size in the wrong slot here: (1, 2, 1, 3) for 24 elements, after which
    # it crashes (segmentation fault); with a trailing -1 it writes past the end of its shape vector
    # (heap corruption). So MXNet is not run on these; the reference is numpy's reshape.
    b.add("Reshape", "(2, 3, 4)->(-4, 1, 2, -1, 0)", [b.u(2, 3, 4)], {"shape": "(-4, 1, 2, -1, 0)"},
          backward=False, reference=lambda inputs: [inputs[0].reshape(1, 2, 3, 4)])
    b.add("Reshape", "(2, 3, 4)->(-4, 1, 2, -1)", [b.u(2, 3, 4)], {"shape": "(-4, 1, 2, -1)"},
          backward=False, reference=lambda inputs: [inputs[0].reshape(1, 2, 12)])
    b.add("Reshape", "target_shape", [b.u(2, 3, 4)], {"target_shape": "(4, 0)"})
    b.add("Reshape", "keep_highest", [b.u(2, 3, 4)], {"target_shape": "(5, 0)", "keep_highest": True})
    for shape in ((2, 3, 4, 5), (4,), (3, 4), (2, 1, 3)):
        b.add("Flatten", f"{shape}", [b.u(*shape)])


def add_layout(b):
    x = b.u(2, 3, 4, 5)
    for axes in (None, (0, 2, 1, 3), (3, 0, 2, 1)):
        b.add("transpose", f"axes={axes}", [x], {} if axes is None else {"axes": tup(axes)})
    b.add("transpose", "2d", [b.u(3, 7)])
    for axis in (0, 1, -1, 3):
        b.add("expand_dims", f"axis={axis}", [b.u(2, 3, 4)], {"axis": axis})
    y = b.u(1, 3, 1, 4)
    b.add("squeeze", "all", [y])
    b.add("squeeze", "axis=(2,)", [y], {"axis": "(2,)"})
    b.add("squeeze", "axis=(0,2)", [y], {"axis": "(0, 2)"})
    for target in ((2, 3, 4), (2, 0, 4)):
        b.add("broadcast_to", f"to{target}", [b.u(1, 3, 1)], {"shape": tup(target)})
    for reps in ((2,), (2, 1, 3), (1, 2)):
        b.add("tile", f"reps={tup(reps)}", [b.u(2, 3, 4)], {"reps": tup(reps)})
    # MXNet's tile goes through a reduction over 2*ndim axes and fails above its limit ("Too many
    # reduction axes from [2,1,2,2,2,3,2,4]"), forward included; the reference is numpy's tile
    b.add("tile", "reps=(2, 2, 2, 2)", [b.u(2, 3, 4)], {"reps": "(2, 2, 2, 2)"}, backward=False,
          reference=lambda inputs: [np.tile(inputs[0], (2, 2, 2, 2))])


def add_slicing(b):
    x = b.u(4, 5, 6)
    for begin, end, step in (((0, 1), (2, 3), None), ((1, None, 2), (3, None, None), None),
                             ((None, 1), (None, 5), (1, 2)), ((3, None), (0, None), (-1, None)),
                             ((-3,), (None,), None), ((0, 4, 1), (4, 0, 5), (2, -2, 2))):
        attrs = {"begin": tup("None" if v is None else v for v in begin),
                 "end": tup("None" if v is None else v for v in end)}
        if step is not None:
            attrs["step"] = tup("None" if v is None else v for v in step)
        b.add("slice", f"b={attrs['begin']},e={attrs['end']},s={attrs.get('step', '()')}", [x], attrs)
    for axis, begin, end in ((0, 1, 3), (1, 0, None), (-1, 2, -1), (2, -4, None)):
        b.add("slice_axis", f"axis={axis},{begin}:{end}", [x], {"axis": axis, "begin": begin, "end": end})
    for n, axis, squeeze in ((2, 1, False), (3, 0, False), (4, -1, False), (5, 1, True), (3, 2, True),
                             (1, 1, False)):
        shape = [4, 5, 6]
        shape[axis] = n if squeeze else n * 2
        if n == 4 and axis == -1:
            shape = [3, 2, 8]
        b.add("SliceChannel", f"n={n},axis={axis},squeeze={squeeze}", [b.u(*shape)],
              {"num_outputs": n, "axis": axis, "squeeze_axis": squeeze})


def add_joining(b):
    for dim, shapes in ((1, [(2, 3, 4), (2, 5, 4)]), (0, [(1, 3), (4, 3), (2, 3)]), (2, [(2, 3, 1), (2, 3, 4)]),
                        (-1, [(3, 2), (3, 3), (3, 1), (3, 2)]), (1, [(2, 3, 2, 2), (2, 1, 2, 2)])):
        inputs = [b.u(*s) for s in shapes]
        b.add("Concat", f"dim={dim},n={len(inputs)}", inputs, {"num_args": len(inputs), "dim": dim})
    b.add("Concat", "default_dim", [b.u(2, 3), b.u(2, 2)], {"num_args": 2})
    for axis, n in ((0, 2), (1, 3), (-1, 2), (2, 4)):
        b.add("stack", f"axis={axis},n={n}", [b.u(2, 3, 4) for _ in range(n)], {"axis": axis, "num_args": n})


def add_crop(b):
    x = b.u(2, 3, 8, 9)
    b.add("Crop", "h_w_offset", [x], {"num_args": 1, "h_w": "(4, 5)", "offset": "(2, 3)"})
    b.add("Crop", "h_w_center", [x], {"num_args": 1, "h_w": "(5, 4)", "center_crop": True})
    b.add("Crop", "like", [x, b.u(2, 3, 6, 6)], {"num_args": 2})
    b.add("Crop", "like_center", [x, b.u(1, 1, 3, 6)], {"num_args": 2, "center_crop": True})
    b.add("Crop", "like_offset", [x, b.u(2, 3, 5, 5)], {"num_args": 2, "offset": "(1, 2)"})


def add_gradient_routing(b):
    b.add("BlockGrad", "4d", [b.u(2, 3, 4, 5)])
    b.add("stop_gradient", "alias", [b.u(3, 4)])
    x = b.u(4, 5)
    b.add("MakeLoss", "default", [x])
    b.add("MakeLoss", "grad_scale", [x], {"grad_scale": 0.3})
    b.add("MakeLoss", "batch", [x], {"normalization": "batch"})
    b.add("MakeLoss", "valid", [x], {"normalization": "valid", "valid_thresh": 0.5})
    b.add("MakeLoss", "valid_scale", [b.u(2, 3, 4)], {"normalization": "valid", "grad_scale": 2.0})


def add_cases(b):
    add_reshapes(b)
    add_layout(b)
    add_slicing(b)
    add_joining(b)
    add_crop(b)
    add_gradient_routing(b)
