// Entry point of the convolution / pooling / dense op group's definitions, and the device-neutral
// helpers those files share (layout checks, convolution geometry).
#include "ops/builtin_ops.h"
#include "ops/defs/conv_common.h"

namespace weft::detail {

void register_conv_dense_ops(OpRegistry& r) {
  register_convolution_ops(r);
  register_fused_conv_ops(r);
  register_deconvolution_ops(r);
  register_pooling_ops(r);
  register_fully_connected_ops(r);
  register_dot_ops(r);
}

void check_channel_first_layout(const OpAttrs& attrs, const std::optional<SpatialLayout>& layout,
                                int nsp) {
  if (!layout) return;
  static const char* kNames[] = {"NCW", "NWC", "NCHW", "NHWC", "NCDHW", "NDHWC"};
  const SpatialLayout first = nsp == 1   ? SpatialLayout::kNCW
                              : nsp == 2 ? SpatialLayout::kNCHW
                                         : SpatialLayout::kNCDHW;
  const SpatialLayout last = nsp == 1   ? SpatialLayout::kNWC
                             : nsp == 2 ? SpatialLayout::kNHWC
                                        : SpatialLayout::kNDHWC;
  if (*layout == first) return;
  if (*layout == last) {
    WEFT_THROW(NotImplemented) << attrs.where() << ": layout " << kNames[static_cast<int>(*layout)]
                               << " is not supported by any device's kernels (only "
                               << kNames[static_cast<int>(first)]
                               << "); transpose the data instead";
  }
  WEFT_THROW(ValueError) << attrs.where() << ": layout " << kNames[static_cast<int>(*layout)]
                         << " does not fit a " << nsp << "-d kernel (expected "
                         << kNames[static_cast<int>(first)] << ")";
}

void fill_spatial_tuple(Shape& t, int nsp, int64_t value, const char* name) {
  if (t.ndim() <= 0) {
    t = Shape::filled(nsp, value);
    return;
  }
  WEFT_CHECK(t.ndim() == nsp) << name << " " << t.to_string() << " must have " << nsp
                              << " entries, like the kernel";
}

bool ConvGeom::pointwise() const {
  for (int i = 0; i < 3; ++i) {
    if (k[i] != 1 || s[i] != 1 || p[i] != 0) return false;
  }
  return in == out;
}

void ConvGeom::set_window(const Shape& kernel, const Shape& stride, const Shape& dilate,
                          const Shape& pad) {
  nsp = kernel.ndim();
  for (int i = 0; i < nsp; ++i) {
    const int slot = 3 - nsp + i;
    k[slot] = kernel[i];
    s[slot] = stride[i];
    d[slot] = dilate[i];
    p[slot] = pad[i];
  }
}

void ConvGeom::set_spatial(const Shape& in_shape, const Shape& out_shape) {
  for (int i = 0; i < nsp; ++i) {
    in[3 - nsp + i] = in_shape[in_shape.ndim() - nsp + i];
    out[3 - nsp + i] = out_shape[out_shape.ndim() - nsp + i];
  }
}

}  // namespace weft::detail
