// Reduced-precision binds (see precision.h).
//
// Note [Reduced-precision binds]
// A graph runs in float16 or bfloat16 when its data inputs and weights have that type; the ops'
// type rules carry it from entry to entry. Three kinds of variables must not follow:
//  - float32 side inputs an op's type rule asks for: BatchNorm's gamma, beta and moving
//    statistics (MXNet's and cuDNN's rule, bn_types in ops/defs/batch_norm.cc). The plan leaves
//    the weights untyped and lets inference give them their types from the data, so whatever an
//    op's rule says wins; LayerNorm's rule gives gamma and beta the data's type (as MXNet), and
//    the regression heads' labels, which are values, follow the data too. Inference alone cannot
//    decide the weights: a rule may fall back to float32 before the data's type reaches it
//    (Embedding's weight takes the op's `dtype`, float32, since its indices are float32, and
//    the float32 embedding then meets the 16-bit recurrence). So each weight is offered the type
//    at every op that reads it: the op's rule runs on that node alone, its other inputs typed
//    as the 16-bit graph would type them (every floating entry 16-bit, index inputs float32) and
//    its outputs unknown; the weight takes the type when every reader accepts it, else stays
//    float32 (BatchNorm's rule refuses 16-bit gamma for 16-bit data, Embedding's takes a 16-bit
//    weight). Inference over the whole graph with all these types then checks the plan.
//  - integers carried in a floating array: class labels (SoftmaxOutput, CTC), Embedding's
//    indices, pick's and one_hot's indices, sequence lengths. bfloat16 holds integers exactly
//    only up to 256 and float16 up to 2048 (class 1001 becomes 1000 in bfloat16). Their type
//    rules accept any type, so only a table of input names can tell them (index_input below);
//    they stay float32, which every kernel that reads them accepts (the CUDA kernels read
//    indices and labels of any type).
//  - variables of other types (integer `__dtype__`s, float64): what a float32 bind gives them.
// The conversions run on the host (cast_array): round to nearest even, as CUDA's
// __float2bfloat16_rn and __float2half_rn do, so the bits do not depend on the device.
//
// Note [Reduced-precision tolerances]
// A 16-bit type keeps p significant bits: the unit roundoff u = 2^-p is 2^-8 = 3.9e-3 for
// bfloat16 and 2^-11 = 4.9e-4 for float16. A convolutional network rounds each layer's input,
// weight and output once (the cuDNN/cuBLAS kernels accumulate in float32), and the roundings of
// the L layers on a path add like a random walk: a relative error of about u·sqrt(3L), which for
// ResNet-50's ~50 layers is about 12u (4.7e-2 in bfloat16, 5.9e-3 in float16). The defaults
// take rtol = atol = 5e-2 for bfloat16 (13u) and 1e-2 for float16 (20u: float16's u is small
// enough that the float32 reference's own differences between devices, about 1e-4 to 1e-3 after
// 50 layers of oneDNN against cuDNN summation orders, eat into it). atol is in the output's
// units: for outputs far from 1 (softmax probabilities over 1000 classes are about 1e-3) pass
// --atol, or compare relative norms as tests/gpu/gpu_replay_dtype_test.cc does.
#include "graph/precision.h"

#include <cmath>
#include <cstring>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace weft::graph {
namespace {

bool is_16bit(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

// Whether input `name` of `op` carries integers (Note [Reduced-precision binds]).
bool index_input(std::string_view op, std::string_view name) {
  if (name == "index" || name == "indices" || name == "sequence_length" || name == "length" ||
      name == "data_lengths" || name == "label_lengths")
    return true;
  if (name == "label") return op == "SoftmaxOutput" || op == "_contrib_CTCLoss";
  return op == "Embedding" && name == "data";
}

// Whether every op reading variable `var` accepts `dtype` for it, the other inputs having the
// types `entry_types` gives them and the outputs unknown.
bool readers_accept(const Graph& g, const std::vector<DType>& entry_types, uint32_t var,
                    DType dtype) {
  std::vector<DType> in, out;
  for (uint32_t nid = var + 1; nid < g.nodes.size(); ++nid) {
    const Node& n = g.nodes[nid];
    if (n.is_variable()) continue;
    bool reads = false;
    in.clear();
    for (const NodeEntry& e : n.inputs) {
      reads = reads || e.node == var;
      in.push_back(e.node == var ? dtype : entry_types[g.entry_id(e)]);
    }
    if (!reads) continue;
    out.assign(static_cast<size_t>(n.num_outputs()), DType::kUnknown);
    try {
      n.op->infer_type(*n.op_attrs, in, out);
    } catch (const Error&) {
      return false;
    }
  }
  return true;
}

std::string describe_input(const Graph& g, uint32_t nid, size_t slot) {
  const Node& n = g.nodes[nid];
  const std::vector<std::string> names = n.op->input_names(*n.op_attrs);
  const std::string input = slot < names.size() ? names[slot] : std::to_string(slot);
  return "op '" + n.op->name() + "' (node '" + n.name + "') input '" + input + "'";
}

}  // namespace

DType parse_precision(const std::string& text) {
  if (text == "bf16" || text == "bfloat16") return DType::kBFloat16;
  if (text == "fp16" || text == "float16" || text == "half") return DType::kFloat16;
  WEFT_CHECK(text == "fp32" || text == "float32")
      << "precision '" << text << "': expected float32, bf16 (bfloat16) or fp16 (float16)";
  return DType::kFloat32;
}

PrecisionPlan plan_precision(const Graph& graph, const InferInputs& inputs, DType dtype) {
  PrecisionPlan plan;
  plan.dtype = dtype;
  plan.dtypes = inputs.dtypes;
  if (dtype == DType::kFloat32) return plan;
  WEFT_CHECK(is_16bit(dtype)) << "plan_precision: " << dtype_name(dtype)
                              << " is not a 16-bit floating type (float16, bfloat16)";
  WEFT_CHECK(!inputs.shapes.empty())
      << "plan_precision: no data input is named (InferInputs::shapes)";
  InferInputs probe = inputs;
  probe.device.reset();
  // What a float32 bind gives each variable: only float32 ones change.
  const InferResult f32 = infer_shapes_types(graph, probe, false);
  std::vector<bool> floating(graph.nodes.size(), false);
  for (uint32_t nid : graph.variable_nodes()) {
    const DType t = f32.dtypes[graph.entry_id(nid, 0)];
    floating[nid] = t == DType::kFloat32 || t == DType::kUnknown;
  }
  // Index inputs, and the first consumer of every variable (for the reasons).
  std::map<uint32_t, std::string> index_vars, first_use;
  for (uint32_t nid = 0; nid < graph.nodes.size(); ++nid) {
    const Node& n = graph.nodes[nid];
    if (n.is_variable()) continue;
    const std::vector<std::string> names = n.op->input_names(*n.op_attrs);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const uint32_t v = n.inputs[i].node;
      if (!graph.nodes[v].is_variable() || !floating[v]) continue;
      if (!first_use.count(v)) first_use[v] = describe_input(graph, nid, i);
      if (i < names.size() && index_input(n.op->name(), names[i]) && !index_vars.count(v))
        index_vars[v] = describe_input(graph, nid, i);
    }
  }
  // Every entry as the 16-bit graph would type it: floating ones 16-bit, index inputs float32.
  std::vector<DType> assumed = f32.dtypes;
  for (DType& t : assumed) {
    if (t == DType::kFloat32 || t == DType::kUnknown) t = dtype;
  }
  for (const auto& [nid, reason] : index_vars) assumed[graph.entry_id(nid, 0)] = DType::kFloat32;
  // Data inputs take the type, index inputs float32, weights the type where every reader
  // accepts it.
  for (uint32_t nid : graph.variable_nodes()) {
    if (!floating[nid]) continue;
    const std::string& name = graph.nodes[nid].name;
    const bool data = inputs.shapes.count(name) > 0;
    const bool takes =
        !index_vars.count(nid) &&
        (data || (first_use.count(nid) && readers_accept(graph, assumed, nid, dtype)));
    probe.dtypes[name] = takes ? dtype : DType::kFloat32;
  }
  const InferResult typed = infer_shapes_types(graph, probe, false);
  for (uint32_t nid : graph.variable_nodes()) {
    if (!floating[nid]) continue;
    const std::string& name = graph.nodes[nid].name;
    DType t = typed.dtypes[graph.entry_id(nid, 0)];
    if (t == DType::kUnknown) t = DType::kFloat32;
    plan.dtypes[name] = t;
    if (t == dtype) {
      ++plan.cast;
    } else if (t == DType::kFloat32) {
      auto it = index_vars.find(nid);
      plan.kept_float32[name] = it != index_vars.end() ? it->second
                                : first_use.count(nid) ? first_use[nid]
                                                       : std::string("read by no op");
    }
  }
  return plan;
}

Tolerance precision_tolerance(DType dtype) {
  if (dtype == DType::kBFloat16) return {5e-2, 5e-2};
  if (dtype == DType::kFloat16) return {1e-2, 1e-2};
  return {};
}

uint16_t float_to_bfloat16(float value) {
  uint32_t u = 0;
  std::memcpy(&u, &value, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // to nearest, ties to even (overflows to infinity)
  return static_cast<uint16_t>(u >> 16);
}

float bfloat16_to_float(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t float_to_float16(float value) {
  uint32_t u = 0;
  std::memcpy(&u, &value, sizeof u);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // from 65520 (65504 + half a step): infinity
  if (a >= 0x38800000u) {                       // normal in float16 (from 2^-14)
    uint32_t r = a - 0x38000000u;               // exponent bias 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);             // 13 bits dropped, ties to even
    return static_cast<uint16_t>(sign | (r >> 13));
  }
  // Subnormal in float16: a multiple of 2^-24, rounded to nearest even.
  const int exponent = static_cast<int>(a >> 23);
  const int shift = 126 - exponent;  // mantissa * 2^(exponent - 150) / 2^-24
  if (shift > 24) return sign;
  const uint32_t mantissa = (a & 0x7fffffu) | 0x800000u;
  uint32_t q = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

float float16_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu, mantissa = bits & 0x3ffu;
  uint32_t u = 0;
  if (exponent == 0x1f) {
    u = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent == 0) {
    const float f = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
    return sign ? -f : f;
  } else {
    u = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

NDArray cast_array(const NDArray& src, DType dtype, Device device) {
  if (src.dtype() == dtype) return src.device() == device ? src : src.copy_to(device);
  if (!is_16bit(dtype) && !is_16bit(src.dtype())) {
    NDArray on = src.device() == device ? src : src.copy_to(device);
    return invoke1("Cast", {on}, {{"dtype", dtype_name(dtype)}});
  }
  const auto n = static_cast<size_t>(src.size());
  std::vector<float> values(n);
  if (is_16bit(src.dtype())) {
    std::vector<uint16_t> bits(n);
    src.copy_to_host(bits.data(), n * sizeof(uint16_t));
    const bool bf16 = src.dtype() == DType::kBFloat16;
    for (size_t i = 0; i < n; ++i)
      values[i] = bf16 ? bfloat16_to_float(bits[i]) : float16_to_float(bits[i]);
  } else if (src.dtype() == DType::kFloat32) {
    values = src.to_vector<float>();
  } else {
    const std::vector<double> d = src.to_doubles();
    for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(d[i]);
  }
  if (!is_16bit(dtype)) {
    return cast_array(NDArray::from_vector(src.shape(), values, Device::cpu()), dtype, device);
  }
  std::vector<uint16_t> bits(n);
  const bool bf16 = dtype == DType::kBFloat16;
  for (size_t i = 0; i < n; ++i)
    bits[i] = bf16 ? float_to_bfloat16(values[i]) : float_to_float16(values[i]);
  return NDArray::from_host(bits.data(), src.shape(), dtype, device);
}

}  // namespace weft::graph
