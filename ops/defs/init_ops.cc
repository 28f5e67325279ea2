// Creation ops without inputs: _zeros, _ones, _full, _arange and the random samplers
// _random_uniform / _random_normal (MXNet's init_op.h and sample_op.h semantics; definitions, CPU
// kernels in ops/cpu/init_ops.cc).
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/defs/init_params.h"
#include "ops/infer_util.h"
#include "ops/op.h"

namespace weft::detail {
namespace {

// ---- inference
// ------------------------------------------------------------------------------------

// Note [Legacy creation shapes]
// MXNet 1.x (non-numpy mode) reads a 0 in a creation op's `shape` as "unknown", to be inferred
// from the consumers (e.g. an RNN begin state `zeros(shape=(0, 256))` whose batch dimension
// comes from the data). An empty `shape` means "whatever the output turns out to be" when the
// output shape is already known, and a 0-d scalar otherwise.

/// FInferShape of the creation ops with a `shape` field; see Note [Legacy creation shapes].
template <typename P>
bool infer_creation_shape(const OpAttrs& attrs, std::vector<Shape>&, std::vector<Shape>& out) {
  const Shape& given = attrs.params<P>().shape;
  if (given.ndim() <= 0 && out[0].rank_known()) return out[0].known();
  Shape wanted = given.rank_known() ? given : Shape::filled(0, 0);
  for (int64_t& d : wanted)
    if (d == 0) d = -1;
  assign_output_shape(attrs, out, 0, wanted);
  return out[0].known();
}

/// FInferType of ops whose output dtype is the `dtype` param.
template <typename P>
bool infer_param_type(const OpAttrs& attrs, std::vector<DType>&, std::vector<DType>& out) {
  assign_output_type(attrs, out, 0, attrs.params<P>().dtype);
  return true;
}

/// FInferType of the samplers: dtype None takes the output's type when known, else float32.
template <typename P>
bool infer_random_type(const OpAttrs& attrs, std::vector<DType>&, std::vector<DType>& out) {
  const auto& dtype = attrs.params<P>().dtype;
  if (dtype) {
    assign_output_type(attrs, out, 0, *dtype);
  } else if (out[0] == DType::kUnknown) {
    out[0] = DType::kFloat32;
  }
  WEFT_CHECK_AS(ShapeError,
                out[0] == DType::kFloat32 || out[0] == DType::kFloat64 || out[0] == DType::kFloat16)
      << attrs.where() << ": output dtype " << dtype_name(out[0]) << " is not a floating type";
  return true;
}

bool infer_arange_shape(const OpAttrs& attrs, std::vector<Shape>&, std::vector<Shape>& out) {
  const auto& p = attrs.params<ArangeParam>();
  if (!p.stop) {  // infer_range without stop: the size comes from the consumer
    if (out[0].rank_known() && out[0].ndim() != 1) {
      throw_shape_error(attrs, "the output must be 1-D, got " + out[0].to_string());
    }
    return out[0].known();
  }
  const double size = std::ceil((*p.stop - p.start) / p.step) * p.repeat;
  // Checked as a double: converting one beyond int64's range is undefined behaviour.
  if (!(size >= 0 && size <= static_cast<double>(kMaxElements))) {
    throw_shape_error(attrs, "the range (start, stop, step, repeat) = (" + std::to_string(p.start) +
                                 ", " + std::to_string(*p.stop) + ", " + std::to_string(p.step) +
                                 ", " + std::to_string(p.repeat) +
                                 ") has more than 2^56 elements, weft's limit for one array");
  }
  assign_output_shape(attrs, out, 0, Shape{static_cast<int64_t>(size)});
  return true;
}

std::vector<ResourceRequest> random_resource(const OpAttrs&, const std::vector<Shape>&,
                                             const std::vector<Shape>&) {
  return {ResourceRequest{ResourceRequest::Kind::kRandom, 0}};
}

/// Registers a creation op with no inputs, one output, and no gradient (nothing to differentiate).
template <typename P>
Op& register_creation(OpRegistry& r, const std::string& name, std::string description) {
  Op& op = r.define_op(name);
  op.set_params<P>();
  return op.describe(std::move(description)).set_num_inputs(0).set_num_outputs(1);
}

}  // namespace

void register_init_ops(OpRegistry& r) {
  register_creation<InitParam>(r, "_zeros", "An array of zeros of the given shape and dtype.")
      .set_attr<FInferShape>(infer_creation_shape<InitParam>)
      .set_attr<FInferType>(infer_param_type<InitParam>);
  r.add_alias("zeros", "_zeros");

  register_creation<InitParam>(r, "_ones", "An array of ones of the given shape and dtype.")
      .set_attr<FInferShape>(infer_creation_shape<InitParam>)
      .set_attr<FInferType>(infer_param_type<InitParam>);
  r.add_alias("ones", "_ones");

  register_creation<FullParam>(r, "_full",
                               "An array of the given shape and dtype filled with `value`.")
      .set_attr<FInferShape>(infer_creation_shape<FullParam>)
      .set_attr<FInferType>(infer_param_type<FullParam>);
  r.add_alias("full", "_full");

  register_creation<ArangeParam>(
      r, "_arange",
      "Evenly spaced values in [start, stop) with spacing `step`, each repeated `repeat` times. "
      "Without "
      "`stop` the range is [0, start); with infer_range the length comes from the output shape.")
      .set_attr<FInferShape>(infer_arange_shape)
      .set_attr<FInferType>(infer_param_type<ArangeParam>);
  r.add_alias("arange", "_arange");

  register_creation<UniformParam>(
      r, "_random_uniform",
      "Samples from the uniform distribution on [low, high) (engine random state).")
      .set_attr<FInferShape>(infer_creation_shape<UniformParam>)
      .set_attr<FInferType>(infer_random_type<UniformParam>)
      .set_attr<FResourceRequest>(random_resource);
  r.add_alias("random_uniform", "_random_uniform");
  r.add_alias("uniform", "_random_uniform");

  register_creation<NormalParam>(
      r, "_random_normal",
      "Samples from the normal distribution N(loc, scale^2) (engine random state).")
      .set_attr<FInferShape>(infer_creation_shape<NormalParam>)
      .set_attr<FInferType>(infer_random_type<NormalParam>)
      .set_attr<FResourceRequest>(random_resource);
  r.add_alias("random_normal", "_random_normal");
  r.add_alias("normal", "_random_normal");
}

}  // namespace weft::detail
