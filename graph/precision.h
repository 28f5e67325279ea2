// Reduced-precision binds (Note [Reduced-precision binds] in precision.cc): which variables of a
// graph take a 16-bit floating type and which stay float32, float32 <-> float16/bfloat16
// conversion of arrays, and the tolerances a 16-bit run is compared with against float32.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "graph/graph.h"
#include "graph/infer.h"
#include "ndarray/ndarray.h"

namespace weft::graph {

/// The type a precision name means: float32 (also fp32), bfloat16 (bf16), float16 (fp16, half).
/// Throws ValueError naming `text` otherwise. Thread-safe.
DType parse_precision(const std::string& text);

/// What plan_precision decides for a graph.
struct PrecisionPlan {
  /// The type the graph runs in.
  DType dtype = DType::kFloat32;
  /// The type of every floating variable, for InferInputs::dtypes (BindOptions::inputs.dtypes):
  /// `dtype` for data inputs and weights, float32 where an op keeps a float32 side input.
  /// Variables of other types (integers, float64) are absent and keep their own.
  std::map<std::string, DType, std::less<>> dtypes;
  /// The floating variables kept float32, each with the op input that keeps it ("op
  /// 'BatchNorm' (node 'bn0') input 'gamma'").
  std::map<std::string, std::string, std::less<>> kept_float32;
  /// How many variables take `dtype`.
  int cast = 0;
};

/// Plans a bind of `graph` in `dtype` (float16 or bfloat16; float32 returns `inputs.dtypes`
/// unchanged): the variables named in `inputs.shapes` are the data inputs. Index and label
/// inputs stay float32 (class labels of SoftmaxOutput and CTC, Embedding's indices, pick's and
/// one_hot's indices, sequence lengths: a 16-bit type rounds integers above 256 or 2048), the
/// other data inputs take `dtype`, and the ops' type rules carry it to the weights, so a weight
/// an op wants in float32 (BatchNorm's gamma, beta and moving statistics) stays float32. A
/// `__dtype__` attribute of a floating variable is overridden. Throws what inference throws when
/// an op refuses the type (CTCLoss, for one), naming the node. Pure function; thread-safe.
///
/// Bind such a plan unfused (BindOptions::fuse = false): the fused convolution folds BatchNorm
/// and convolves in float32 only, and its type rule refuses 16-bit data.
PrecisionPlan plan_precision(const Graph& graph, const InferInputs& inputs, DType dtype);

/// Default tolerances of a comparison against float32 results, |a - b| <= atol + rtol * |b|
/// (`weft replay --compare`): 1e-4/1e-5 for float32, 5e-2/5e-2 for bfloat16, 1e-2/1e-2 for
/// float16 (Note [Reduced-precision tolerances] in precision.cc).
struct Tolerance {
  double rtol = 1e-4;
  double atol = 1e-5;
};
Tolerance precision_tolerance(DType dtype);

/// `src` converted to `dtype` on `device`. Conversions to and from float16/bfloat16 run on the
/// host (round to nearest even; float16 overflows to infinity), so a CPU without 16-bit kernels
/// converts too and every device gets the same bits; other conversions use the device's Cast
/// kernel. Returns `src` itself when type and device already match. Waits for `src`.
NDArray cast_array(const NDArray& src, DType dtype, Device device);

/// Scalar conversions behind cast_array (round to nearest even; NaN stays NaN).
uint16_t float_to_bfloat16(float value);
float bfloat16_to_float(uint16_t bits);
uint16_t float_to_float16(float value);
float float16_to_float(uint16_t bits);

}  // namespace weft::graph
