// Pooling (max / avg / sum / lp over 1-D, 2-D and 3-D windows; valid / full / same conventions;
// global pooling) and _backward_Pooling: the definitions (params, shape inference with MXNet's
// window arithmetic, gradient). The kernels are in ops/cpu/pooling.cc and ops/cuda/cudnn_nn.cc.
#include <string>

#include "ops/defs/conv_common.h"
#include "ops/defs/pooling_params.h"

namespace weft::detail {
namespace {

/// Spatial dims of the pooling: global pooling follows the data (its kernel may be a dummy).
int spatial_rank(const PoolingParam& p, int data_ndim) {
  return p.global_pool ? data_ndim - 2 : p.kernel.ndim();
}

bool pool_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = attrs.params<PoolingParam>();
  if (p.output_size && p.output_size->ndim() > 0) {
    WEFT_THROW(NotImplemented) << attrs.where() << ": adaptive pooling (output_size "
                               << p.output_size->to_string() << ") is not supported";
  }
  if (!in[0].rank_known()) {
    if (out[0].rank_known() && out[0].ndim() >= 3) {
      Shape d = Shape::filled(out[0].ndim(), -1);
      d[0] = out[0][0];
      d[1] = out[0][1];
      assign_input_shape(attrs, in, 0, d);
    }
    return false;
  }
  const Shape& data = in[0];
  if (data.ndim() < 3 || data.ndim() > 5) {
    throw_shape_error(attrs,
                      "data must be 3-d, 4-d or 5-d (N, C, spatial...), got " + data.to_string());
  }
  const int nsp = spatial_rank(p, data.ndim());
  if (!p.global_pool && data.ndim() != nsp + 2) {
    throw_shape_error(attrs, "data must be " + std::to_string(nsp + 2) + "-d for a " +
                                 std::to_string(nsp) + "-d kernel, got " + data.to_string());
  }
  check_channel_first_layout(attrs, p.layout, nsp);
  if (p.pooling_convention == PoolConvention::kSame && data.ndim() != 3) {
    throw_shape_error(attrs,
                      "the 'same' pooling convention supports 1-D pooling only (3-d data), got " +
                          data.to_string());
  }
  Shape os = data;
  if (p.global_pool) {
    for (int i = 0; i < nsp; ++i) os[2 + i] = 1;
  } else {
    for (int i = 0; i < nsp; ++i) {
      const int64_t x = data[2 + i];
      if (x < 0) continue;
      const int64_t k = p.kernel[i], s = p.stride[i], pad = p.pad[i];
      if (k > x + 2 * pad) {
        throw_shape_error(attrs, "kernel size " + std::to_string(k) +
                                     " exceeds padded input size " + std::to_string(x + 2 * pad) +
                                     " (data " + data.to_string() + ")");
      }
      switch (p.pooling_convention) {
        case PoolConvention::kValid:
          os[2 + i] = (x + 2 * pad - k) / s + 1;
          break;
        case PoolConvention::kFull:
          os[2 + i] = (x + 2 * pad - k + s - 1) / s + 1;
          break;
        case PoolConvention::kSame:
          os[2 + i] = (x + s - 1) / s;
          break;
      }
    }
  }
  assign_output_shape(attrs, out, 0, os);
  // Batch and channels flow back from the output.
  Shape d = Shape::filled(data.ndim(), -1);
  d[0] = out[0][0];
  d[1] = out[0][1];
  assign_input_shape(attrs, in, 0, d);
  return in[0].known() && out[0].known();
}

// _backward_Pooling: inputs (out_grad, data, output), output d_data.
bool pool_backward_infer_shape(const OpAttrs& attrs, std::vector<Shape>& in,
                               std::vector<Shape>& out) {
  assign_output_shape(attrs, out, 0, in[1]);
  assign_input_shape(attrs, in, 1, out[0]);
  assign_input_shape(attrs, in, 0, in[2]);
  assign_input_shape(attrs, in, 2, in[0]);
  return all_known(in) && all_known(out);
}

}  // namespace

void register_pooling_ops(OpRegistry& r) {
  r.define_op("Pooling")
      .describe(
          "Max / avg / sum / lp pooling over 1-D, 2-D or 3-D windows of NCW/NCHW/NCDHW data. "
          "Output size: "
          "valid floor((x+2p-k)/s)+1, full ceil((x+2p-k)/s)+1, same ceil(x/s) (1-D). Max ignores "
          "padding; avg "
          "divides by the window clipped to x+p (or by the real elements when count_include_pad is "
          "False). "
          "global_pool pools each channel to 1. One output (no workspace output).")
      .set_params<PoolingParam>()
      .set_input_names({"data"})
      .set_output_names({"output"})
      .set_attr<FInferShape>(pool_infer_shape)
      .set_attr<FGradient>([](GradBuilder& b) {
        return std::vector<GradEntry>{
            b.emit_with_forward_attrs("_backward_Pooling", {b.out_grad(0), b.input(0), b.output(0)})
                .at(0)};
      });
  r.add_alias("_npx_pooling", "Pooling");

  r.define_op("_backward_Pooling")
      .describe("Gradient of Pooling: inputs (out_grad, data, output); output d_data.")
      .set_params<PoolingParam>()
      .set_input_names({"out_grad", "data", "output"})
      .set_attr<FInferShape>(pool_backward_infer_shape);
}

}  // namespace weft::detail
