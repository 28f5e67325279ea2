// Direct (engine-free) execution of op kernels and FGradients for tests.
#include "tests/ops/op_harness.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>

namespace weft::testing {
namespace {

// 64-byte aligned raw buffer.
struct Buffer {
  explicit Buffer(size_t bytes) : size(bytes) {
    ptr = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
    std::memset(ptr, 0, std::max<size_t>(bytes, 1));
  }
  ~Buffer() { std::free(ptr); }
  Buffer(const Buffer&) = delete;
  void* ptr;
  size_t size;
};

template <typename T>
void store(void* dst, const std::vector<double>& src) {
  T* p = static_cast<T*>(dst);
  for (size_t i = 0; i < src.size(); ++i) p[i] = static_cast<T>(src[i]);
}
template <typename T>
void load(const void* src, std::vector<double>& dst, size_t n) {
  const T* p = static_cast<const T*>(src);
  dst.resize(n);
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<double>(p[i]);
}

void to_buffer(const HostTensor& t, void* dst) {
  WEFT_DTYPE_SWITCH(t.dtype, DT, "test harness", store<DT>(dst, t.data));
}
void from_buffer(HostTensor& t, const void* src) {
  WEFT_DTYPE_SWITCH(t.dtype, DT, "test harness",
                    load<DT>(src, t.data, static_cast<size_t>(t.shape.size())));
}

std::vector<HostTensor> run_impl(const OpAttrs& attrs, std::vector<HostTensor>& inputs,
                                 const RunOptions& options, bool write_back_mutated) {
  const Op& op = *attrs.op;
  const int nin = op.num_inputs(attrs);
  WEFT_CHECK(static_cast<int>(inputs.size()) == nin)
      << attrs.where() << ": expects " << nin << " inputs, got " << inputs.size();
  std::vector<Shape> in_shapes, out_shapes;
  std::vector<DType> in_types, out_types;
  for (const auto& t : inputs) {
    in_shapes.push_back(t.shape);
    in_types.push_back(t.dtype);
  }
  const int nout = op.num_outputs(attrs);
  out_shapes.resize(nout);
  out_types.assign(nout, DType::kUnknown);
  for (int i = 0; i < nout && i < static_cast<int>(options.initial_outputs.size()); ++i) {
    out_shapes[i] = options.initial_outputs[i].shape;
    out_types[i] = options.initial_outputs[i].dtype;
  }
  op.infer_shape(attrs, in_shapes, out_shapes);
  op.infer_type(attrs, in_types, out_types);
  for (int i = 0; i < nin; ++i) {
    WEFT_CHECK(in_shapes[i] == inputs[i].shape)
        << attrs.where() << ": inference changed input " << i << " to " << in_shapes[i];
  }
  for (int i = 0; i < nout; ++i) {
    WEFT_CHECK(out_shapes[i].known())
        << attrs.where() << ": output " << i << " shape not inferred: " << out_shapes[i];
    WEFT_CHECK(out_types[i] != DType::kUnknown)
        << attrs.where() << ": output " << i << " type not inferred";
  }
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<TensorView> in_views, out_views;
  for (int i = 0; i < nin; ++i) {
    buffers.push_back(
        std::make_unique<Buffer>(inputs[i].data.size() * dtype_size(inputs[i].dtype)));
    to_buffer(inputs[i], buffers.back()->ptr);
    in_views.emplace_back(buffers.back()->ptr, Device::cpu(), inputs[i].dtype, inputs[i].shape);
  }
  std::vector<HostTensor> outputs(nout);
  for (int i = 0; i < nout; ++i) {
    outputs[i].shape = out_shapes[i];
    outputs[i].dtype = out_types[i];
    outputs[i].data.assign(static_cast<size_t>(out_shapes[i].size()), 0.0);
    if (i < static_cast<int>(options.initial_outputs.size()) &&
        !options.initial_outputs[i].empty()) {
      outputs[i].data = options.initial_outputs[i].data;
    }
    buffers.push_back(std::make_unique<Buffer>(outputs[i].data.size() * dtype_size(out_types[i])));
    to_buffer(outputs[i], buffers.back()->ptr);
    out_views.emplace_back(buffers.back()->ptr, Device::cpu(), out_types[i], outputs[i].shape);
  }
  std::vector<OpReq> req = options.req;
  if (req.empty()) req.assign(nout, OpReq::kWrite);
  WEFT_CHECK(static_cast<int>(req.size()) == nout) << "req must have one entry per output";

  OpContext ctx;
  ctx.is_train = options.is_train;
  ctx.run.device = Device::cpu();
  ctx.num_threads = options.num_threads;
  RandomState random;
  random.engine.seed(options.seed);
  random.seed = options.seed;
  std::unique_ptr<Buffer> workspace;
  if (const auto& f = op.attr<FResourceRequest>()) {
    for (const auto& r : f(attrs, in_shapes, out_shapes)) {
      if (r.kind == ResourceRequest::Kind::kWorkspace) {
        workspace = std::make_unique<Buffer>(r.bytes);
        ctx.workspace = workspace->ptr;
        ctx.workspace_bytes = r.bytes;
      } else {
        ctx.random = &random;
      }
    }
  }
  if (const FCompute* fc = op.compute(DeviceType::kCPU)) {
    (*fc)(attrs, ctx, in_views, req, out_views);
  } else if (const FStatefulCompute* fs = op.stateful_compute(DeviceType::kCPU)) {
    const auto& create = op.attr<FCreateOpState>();
    WEFT_CHECK(static_cast<bool>(create))
        << attrs.where() << ": stateful op without FCreateOpState";
    auto state = create(attrs, Device::cpu(), in_shapes, in_types);
    (*fs)(*state, ctx, in_views, req, out_views);
  } else {
    WEFT_THROW(NotImplemented) << attrs.where() << " has no CPU kernel";
  }
  for (int i = 0; i < nout; ++i) from_buffer(outputs[i], out_views[i].raw());
  if (write_back_mutated) {
    if (const auto& f = op.attr<FMutateInputs>()) {
      for (int i : f(attrs)) from_buffer(inputs[i], in_views[i].raw());
    }
  }
  return outputs;
}

// A GradBuilder that runs each emitted op at once on host tensors.
class HostGradBuilder final : public GradBuilder {
 public:
  HostGradBuilder(const OpAttrs& attrs, const std::vector<HostTensor>& inputs,
                  const std::vector<HostTensor>& outputs, const std::vector<HostTensor>& out_grads,
                  const RunOptions& options)
      : attrs_(attrs), options_(options) {
    for (const auto& t : inputs) input_ids_.push_back(add(t));
    for (const auto& t : outputs) output_ids_.push_back(add(t));
    for (size_t i = 0; i < outputs.size(); ++i) {
      HostTensor g = i < out_grads.size() ? out_grads[i] : HostTensor{};
      if (g.empty()) g = HostTensor::filled(outputs[i].shape, 0.0, outputs[i].dtype);
      grad_ids_.push_back(add(g));
    }
  }
  const OpAttrs& attrs() const override { return attrs_; }
  GradEntry input(int i) override { return {input_ids_.at(i)}; }
  GradEntry output(int i) override { return {output_ids_.at(i)}; }
  GradEntry out_grad(int i) override { return {grad_ids_.at(i)}; }
  std::vector<GradEntry> emit(std::string_view op, std::vector<GradEntry> inputs,
                              AttrMap attrs) override {
    return run(get_op(op).make_attrs(std::move(attrs), attrs_.node_name + "_backward"), inputs);
  }
  std::vector<GradEntry> emit_with_forward_attrs(std::string_view op,
                                                 std::vector<GradEntry> inputs) override {
    return run(get_op(op).make_attrs_like(attrs_), inputs);
  }
  const HostTensor& value(GradEntry e) const { return values_.at(e.id); }

 private:
  int32_t add(HostTensor t) {
    values_.push_back(std::move(t));
    return static_cast<int32_t>(values_.size() - 1);
  }
  std::vector<GradEntry> run(const OpAttrs& attrs, const std::vector<GradEntry>& inputs) {
    std::vector<HostTensor> in;
    for (auto e : inputs) {
      WEFT_CHECK(e.valid()) << attrs.where() << ": gradient emitted with an invalid entry";
      in.push_back(values_.at(e.id));
    }
    RunOptions o;
    o.is_train = options_.is_train;
    o.seed = options_.seed;
    o.num_threads = options_.num_threads;
    std::vector<GradEntry> out;
    for (auto& t : run_impl(attrs, in, o, false)) out.push_back({add(std::move(t))});
    return out;
  }
  const OpAttrs& attrs_;
  RunOptions options_;
  std::vector<HostTensor> values_;
  std::vector<int32_t> input_ids_, output_ids_, grad_ids_;
};

bool is_float(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

}  // namespace

HostTensor HostTensor::of(Shape shape, std::vector<double> values, DType dtype) {
  HostTensor t;
  WEFT_CHECK(shape.size() == static_cast<int64_t>(values.size()))
      << "HostTensor::of: shape " << shape << " needs " << shape.size() << " values, got "
      << values.size();
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.data = std::move(values);
  return t;
}

HostTensor HostTensor::random(Shape shape, uint64_t seed, double lo, double hi, DType dtype) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(shape.size()));
  for (auto& x : v) x = dist(gen);
  if (dtype == DType::kFloat32)
    for (auto& x : v) x = static_cast<float>(x);
  return of(std::move(shape), std::move(v), dtype);
}

HostTensor HostTensor::filled(Shape shape, double value, DType dtype) {
  std::vector<double> v(static_cast<size_t>(shape.size()), value);
  return of(std::move(shape), std::move(v), dtype);
}

static size_t flat_index(const Shape& shape, std::initializer_list<int64_t> index) {
  WEFT_CHECK(static_cast<int>(index.size()) == shape.ndim()) << "HostTensor::at: rank mismatch";
  size_t flat = 0;
  int d = 0;
  for (int64_t i : index) {
    WEFT_CHECK(i >= 0 && i < shape[d]) << "HostTensor::at: index out of range";
    flat = flat * static_cast<size_t>(shape[d]) + static_cast<size_t>(i);
    ++d;
  }
  return flat;
}
double HostTensor::at(std::initializer_list<int64_t> index) const {
  return data[flat_index(shape, index)];
}
double& HostTensor::at(std::initializer_list<int64_t> index) {
  return data[flat_index(shape, index)];
}

std::vector<HostTensor> run_op(const std::string& op, const AttrMap& attrs,
                               const std::vector<HostTensor>& inputs, const RunOptions& options) {
  std::vector<HostTensor> copy = inputs;
  OpAttrs a = get_op(op).make_attrs(attrs, "test");
  return run_impl(a, copy, options, false);
}

std::vector<HostTensor> run_op_mutating(const std::string& op, const AttrMap& attrs,
                                        std::vector<HostTensor>& inputs,
                                        const RunOptions& options) {
  OpAttrs a = get_op(op).make_attrs(attrs, "test");
  return run_impl(a, inputs, options, true);
}

std::pair<std::vector<Shape>, std::vector<Shape>> infer_shapes(const std::string& op,
                                                               const AttrMap& attrs,
                                                               std::vector<Shape> in,
                                                               std::vector<Shape> out) {
  OpAttrs a = get_op(op).make_attrs(attrs, "test");
  a.op->infer_shape(a, in, out);
  return {in, out};
}

std::pair<std::vector<DType>, std::vector<DType>> infer_types(const std::string& op,
                                                              const AttrMap& attrs,
                                                              std::vector<DType> in,
                                                              std::vector<DType> out) {
  OpAttrs a = get_op(op).make_attrs(attrs, "test");
  a.op->infer_type(a, in, out);
  return {in, out};
}

std::vector<HostTensor> op_gradient(const std::string& op_name, const AttrMap& attrs,
                                    const std::vector<HostTensor>& inputs,
                                    const std::vector<HostTensor>& head_grads,
                                    const RunOptions& options) {
  OpAttrs a = get_op(op_name).make_attrs(attrs, "test");
  const auto& fgrad = a.op->attr<FGradient>();
  WEFT_CHECK(static_cast<bool>(fgrad)) << a.where() << " has no FGradient";
  std::vector<HostTensor> in = inputs;
  auto outputs = run_impl(a, in, options, false);
  HostGradBuilder builder(a, inputs, outputs, head_grads, options);
  auto entries = fgrad(builder);
  WEFT_CHECK(entries.size() == inputs.size())
      << a.where() << ": FGradient returned " << entries.size() << " entries for " << inputs.size()
      << " inputs";
  std::vector<HostTensor> grads(inputs.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!entries[i].valid()) continue;
    grads[i] = builder.value(entries[i]);
    WEFT_CHECK(grads[i].shape == inputs[i].shape)
        << a.where() << ": gradient of input " << i << " has shape " << grads[i].shape
        << ", input has " << inputs[i].shape;
  }
  return grads;
}

::testing::AssertionResult check_gradient(const std::string& op_name, const AttrMap& attrs,
                                          const std::vector<HostTensor>& inputs,
                                          const GradCheckOptions& opt) {
  OpAttrs a = get_op(op_name).make_attrs(attrs, "test");
  RunOptions run;
  run.is_train = opt.is_train;
  run.seed = opt.seed;
  auto outputs = run_op(op_name, attrs, inputs, run);
  const int nvis = a.op->num_visible_outputs(a);
  std::vector<int> used = opt.outputs;
  if (used.empty())
    for (int k = 0; k < nvis; ++k) used.push_back(k);
  std::vector<HostTensor> weights(outputs.size());
  for (int k : used) {
    weights[k] = HostTensor::random(outputs[k].shape, 1000 + k, -1.0, 1.0, outputs[k].dtype);
  }
  auto loss = [&](const std::vector<HostTensor>& in) {
    auto out = run_op(op_name, attrs, in, run);
    double l = 0;
    for (int k : used)
      for (int64_t j = 0; j < out[k].size(); ++j) l += out[k].data[j] * weights[k].data[j];
    return l;
  };
  std::vector<HostTensor> heads(nvis);
  for (int k : used) heads[k] = weights[k];
  auto grads = op_gradient(op_name, attrs, inputs, heads, run);

  for (int i : opt.no_grad_inputs) {
    if (!grads[i].empty()) {
      bool all_zero = true;
      for (double g : grads[i].data) all_zero = all_zero && g == 0.0;
      if (!all_zero)
        return ::testing::AssertionFailure()
               << op_name << ": input " << i << " should get no gradient";
    }
  }
  std::vector<int> check = opt.check_inputs;
  if (check.empty()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      bool skip = false;
      for (int n : opt.no_grad_inputs) skip = skip || n == static_cast<int>(i);
      if (!skip && is_float(inputs[i].dtype)) check.push_back(static_cast<int>(i));
    }
  }
  for (int i : check) {
    std::vector<HostTensor> probe = inputs;
    for (int64_t j = 0; j < inputs[i].size(); ++j) {
      const double x = inputs[i].data[j];
      probe[i].data[j] = x + opt.eps;
      const double lp = loss(probe);
      probe[i].data[j] = x - opt.eps;
      const double lm = loss(probe);
      probe[i].data[j] = x;
      const double numeric = (lp - lm) / (2 * opt.eps);
      const double analytic = grads[i].empty() ? 0.0 : grads[i].data[j];
      if (!(std::abs(analytic - numeric) <= opt.atol + opt.rtol * std::abs(numeric))) {
        return ::testing::AssertionFailure()
               << op_name << ": gradient of input " << i << " element " << j << ": analytic "
               << analytic << " vs numeric " << numeric
               << (grads[i].empty() ? " (FGradient gave none)" : "");
      }
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult all_close(const HostTensor& actual, const HostTensor& expected,
                                     double rtol, double atol) {
  if (actual.shape != expected.shape)
    return ::testing::AssertionFailure()
           << "shape " << actual.shape << " vs expected " << expected.shape;
  for (int64_t j = 0; j < actual.size(); ++j) {
    const double a = actual.data[j], e = expected.data[j];
    const bool both_nan = std::isnan(a) && std::isnan(e);
    if (!both_nan && !(std::abs(a - e) <= atol + rtol * std::abs(e)))
      return ::testing::AssertionFailure() << "element " << j << ": " << a << " vs expected " << e;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace weft::testing
