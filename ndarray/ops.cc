// The C++ operator surface: thin wrappers over invoke with attributes parsed once where fixed.
#include "ndarray/ops.h"

#include <memory>

#include "ndarray/autograd.h"

namespace weft {
namespace {

// Attributes of a parameterless op, parsed once.
const std::shared_ptr<const OpAttrs>& fixed(std::string_view name) {
  // One cache entry per call site string; the registry is frozen so the result never changes.
  // The last entry is checked first by address (call sites pass literals), without hashing.
  thread_local std::unordered_map<std::string_view, std::shared_ptr<const OpAttrs>> cache;
  thread_local std::string_view last_name;
  thread_local const std::shared_ptr<const OpAttrs>* last = nullptr;
  if (last != nullptr && name.data() == last_name.data() && name.size() == last_name.size())
    return *last;
  auto& slot = cache[name];
  if (!slot) slot = make_op_attrs(name);
  last_name = name;
  last = &slot;
  return slot;
}

NDArray call1(std::string_view name, const std::vector<NDArray>& in) {
  return std::move(invoke(fixed(name), in).at(0));
}

NDArray binary(const NDArray& a, const NDArray& b, std::string_view same,
               std::string_view broadcast) {
  const std::string_view name = a.shape() == b.shape() ? same : broadcast;
  // The input list is kept per thread (no allocation per call) and emptied after the call, so it
  // holds no array longer than the call does; a call made while it is in use (a kernel run
  // inline that calls an operator) makes its own.
  thread_local std::vector<NDArray> in(2);
  thread_local bool in_use = false;
  if (in_use) return call1(name, {a, b});
  in_use = true;
  in[0] = a;
  in[1] = b;
  struct Release {
    std::vector<NDArray>& in;
    ~Release() {
      in[0] = NDArray();
      in[1] = NDArray();
      in_use = false;
    }
  } release{in};
  return call1(name, in);
}

NDArray scalar_op(std::string_view name, const NDArray& a, double s) {
  return invoke1(name, {a}, {{"scalar", format_float_attr(s)}});
}

std::string axis_attr(const std::vector<int>& axis) {
  if (axis.empty()) return "None";
  std::string s = "(";
  for (size_t i = 0; i < axis.size(); ++i) s += (i ? ", " : "") + std::to_string(axis[i]);
  return s + (axis.size() == 1 ? ",)" : ")");
}

const char* b(bool v) { return v ? "True" : "False"; }

}  // namespace

NDArray operator+(const NDArray& a, const NDArray& b) {
  return binary(a, b, "elemwise_add", "broadcast_add");
}
NDArray operator-(const NDArray& a, const NDArray& b) {
  return binary(a, b, "elemwise_sub", "broadcast_sub");
}
NDArray operator*(const NDArray& a, const NDArray& b) {
  return binary(a, b, "elemwise_mul", "broadcast_mul");
}
NDArray operator/(const NDArray& a, const NDArray& b) {
  return binary(a, b, "elemwise_div", "broadcast_div");
}
NDArray operator+(const NDArray& a, double s) { return scalar_op("_plus_scalar", a, s); }
NDArray operator-(const NDArray& a, double s) { return scalar_op("_minus_scalar", a, s); }
NDArray operator*(const NDArray& a, double s) { return scalar_op("_mul_scalar", a, s); }
NDArray operator/(const NDArray& a, double s) { return scalar_op("_div_scalar", a, s); }
NDArray operator+(double s, const NDArray& a) { return scalar_op("_plus_scalar", a, s); }
NDArray operator-(double s, const NDArray& a) { return scalar_op("_rminus_scalar", a, s); }
NDArray operator*(double s, const NDArray& a) { return scalar_op("_mul_scalar", a, s); }
NDArray operator/(double s, const NDArray& a) { return scalar_op("_rdiv_scalar", a, s); }
NDArray operator-(const NDArray& a) { return call1("negative", {a}); }

namespace op {

NDArray add(const NDArray& a, const NDArray& b) { return a + b; }
NDArray subtract(const NDArray& a, const NDArray& b) { return a - b; }
NDArray multiply(const NDArray& a, const NDArray& b) { return a * b; }
NDArray divide(const NDArray& a, const NDArray& b) { return a / b; }
NDArray power(const NDArray& a, const NDArray& b) {
  return binary(a, b, "_power", "broadcast_power");
}
NDArray maximum(const NDArray& a, const NDArray& b) {
  return binary(a, b, "_maximum", "broadcast_maximum");
}
NDArray minimum(const NDArray& a, const NDArray& b) {
  return binary(a, b, "_minimum", "broadcast_minimum");
}
NDArray add_n(const std::vector<NDArray>& arrays) {
  return invoke1("add_n", arrays, {{"num_args", std::to_string(arrays.size())}});
}

NDArray relu(const NDArray& x) { return call1("relu", {x}); }
NDArray sigmoid(const NDArray& x) { return call1("sigmoid", {x}); }
NDArray tanh(const NDArray& x) { return call1("tanh", {x}); }
NDArray exp(const NDArray& x) { return call1("exp", {x}); }
NDArray log(const NDArray& x) { return call1("log", {x}); }
NDArray sqrt(const NDArray& x) { return call1("sqrt", {x}); }
NDArray square(const NDArray& x) { return call1("square", {x}); }
NDArray abs(const NDArray& x) { return call1("abs", {x}); }
NDArray negative(const NDArray& x) { return call1("negative", {x}); }
NDArray reciprocal(const NDArray& x) { return call1("reciprocal", {x}); }
NDArray sin(const NDArray& x) { return call1("sin", {x}); }
NDArray cos(const NDArray& x) { return call1("cos", {x}); }
NDArray clip(const NDArray& x, double a_min, double a_max) {
  return invoke1("clip", {x},
                 {{"a_min", format_float_attr(a_min)}, {"a_max", format_float_attr(a_max)}});
}
NDArray where(const NDArray& c, const NDArray& x, const NDArray& y) {
  return call1("where", {c, x, y});
}
NDArray cast(const NDArray& x, DType dtype) {
  return invoke1("Cast", {x}, {{"dtype", dtype_name(dtype)}});
}
NDArray stop_gradient(const NDArray& x) { return call1("BlockGrad", {x}); }

NDArray sum(const NDArray& x, const std::vector<int>& axis, bool keepdims) {
  return invoke1("sum", {x}, {{"axis", axis_attr(axis)}, {"keepdims", b(keepdims)}});
}
NDArray mean(const NDArray& x, const std::vector<int>& axis, bool keepdims) {
  return invoke1("mean", {x}, {{"axis", axis_attr(axis)}, {"keepdims", b(keepdims)}});
}
NDArray max(const NDArray& x, const std::vector<int>& axis, bool keepdims) {
  return invoke1("max", {x}, {{"axis", axis_attr(axis)}, {"keepdims", b(keepdims)}});
}
NDArray min(const NDArray& x, const std::vector<int>& axis, bool keepdims) {
  return invoke1("min", {x}, {{"axis", axis_attr(axis)}, {"keepdims", b(keepdims)}});
}
NDArray argmax(const NDArray& x, int axis, bool keepdims) {
  return invoke1("argmax", {x}, {{"axis", std::to_string(axis)}, {"keepdims", b(keepdims)}});
}

NDArray dot(const NDArray& a, const NDArray& b_, bool ta, bool tb) {
  return invoke1("dot", {a, b_}, {{"transpose_a", b(ta)}, {"transpose_b", b(tb)}});
}
NDArray batch_dot(const NDArray& a, const NDArray& b_, bool ta, bool tb) {
  return invoke1("batch_dot", {a, b_}, {{"transpose_a", b(ta)}, {"transpose_b", b(tb)}});
}

NDArray reshape(const NDArray& x, const Shape& shape, bool reverse) {
  return invoke1("Reshape", {x}, {{"shape", format_shape_attr(shape)}, {"reverse", b(reverse)}});
}
NDArray flatten(const NDArray& x) { return call1("Flatten", {x}); }
NDArray transpose(const NDArray& x, const Shape& axes) {
  return invoke1(
      "transpose", {x},
      {{"axes", format_shape_attr(axes.rank_known() ? axes : Shape(std::vector<int64_t>{}))}});
}
NDArray expand_dims(const NDArray& x, int axis) {
  return invoke1("expand_dims", {x}, {{"axis", std::to_string(axis)}});
}
NDArray concat(const std::vector<NDArray>& arrays, int dim) {
  return invoke1("Concat", arrays,
                 {{"num_args", std::to_string(arrays.size())}, {"dim", std::to_string(dim)}});
}
NDArray stack(const std::vector<NDArray>& arrays, int axis) {
  return invoke1("stack", arrays,
                 {{"num_args", std::to_string(arrays.size())}, {"axis", std::to_string(axis)}});
}
std::vector<NDArray> split(const NDArray& x, int num_outputs, int axis, bool squeeze_axis) {
  return invoke("SliceChannel", {x},
                {{"num_outputs", std::to_string(num_outputs)},
                 {"axis", std::to_string(axis)},
                 {"squeeze_axis", b(squeeze_axis)}});
}
NDArray slice_axis(const NDArray& x, int axis, int64_t begin, std::optional<int64_t> end) {
  return invoke1("slice_axis", {x},
                 {{"axis", std::to_string(axis)},
                  {"begin", std::to_string(begin)},
                  {"end", end ? std::to_string(*end) : std::string("None")}});
}
NDArray broadcast_to(const NDArray& x, const Shape& shape) {
  return invoke1("broadcast_to", {x}, {{"shape", format_shape_attr(shape)}});
}

NDArray fully_connected(const NDArray& x, const NDArray& w, const NDArray& bias, int num_hidden,
                        bool flatten) {
  AttrMap a{{"num_hidden", std::to_string(num_hidden)},
            {"flatten", b(flatten)},
            {"no_bias", b(bias.is_none())}};
  std::vector<NDArray> in{x, w};
  if (!bias.is_none()) in.push_back(bias);
  return invoke1("FullyConnected", in, a);
}

NDArray convolution(const NDArray& x, const NDArray& w, const NDArray& bias, const Shape& kernel,
                    int num_filter, const Shape& stride, const Shape& pad, const Shape& dilate,
                    int num_group) {
  AttrMap a{{"kernel", format_shape_attr(kernel)},
            {"num_filter", std::to_string(num_filter)},
            {"num_group", std::to_string(num_group)},
            {"no_bias", b(bias.is_none())}};
  if (stride.rank_known()) a["stride"] = format_shape_attr(stride);
  if (pad.rank_known()) a["pad"] = format_shape_attr(pad);
  if (dilate.rank_known()) a["dilate"] = format_shape_attr(dilate);
  std::vector<NDArray> in{x, w};
  if (!bias.is_none()) in.push_back(bias);
  return invoke1("Convolution", in, a);
}

NDArray pooling(const NDArray& x, const Shape& kernel, const std::string& pool_type,
                const Shape& stride, const Shape& pad, bool global_pool) {
  AttrMap a{{"kernel", format_shape_attr(kernel)},
            {"pool_type", pool_type},
            {"global_pool", b(global_pool)}};
  if (stride.rank_known()) a["stride"] = format_shape_attr(stride);
  if (pad.rank_known()) a["pad"] = format_shape_attr(pad);
  return invoke1("Pooling", {x}, a);
}

NDArray batch_norm(const NDArray& x, const NDArray& gamma, const NDArray& beta,
                   NDArray& moving_mean, NDArray& moving_var, double eps, double momentum,
                   bool fix_gamma) {
  return invoke1("BatchNorm", {x, gamma, beta, moving_mean, moving_var},
                 {{"eps", format_float_attr(eps)},
                  {"momentum", format_float_attr(momentum)},
                  {"fix_gamma", b(fix_gamma)}});
}
NDArray activation(const NDArray& x, const std::string& act_type) {
  return invoke1("Activation", {x}, {{"act_type", act_type}});
}
NDArray softmax(const NDArray& x, int axis) {
  return invoke1("softmax", {x}, {{"axis", std::to_string(axis)}});
}
NDArray log_softmax(const NDArray& x, int axis) {
  return invoke1("log_softmax", {x}, {{"axis", std::to_string(axis)}});
}
NDArray dropout(const NDArray& x, double p) {
  return invoke1("Dropout", {x}, {{"p", format_float_attr(p)}});
}
NDArray softmax_output(const NDArray& x, const NDArray& label) {
  return call1("SoftmaxOutput", {x, label});
}

}  // namespace op
}  // namespace weft
