// Direct (engine-free) execution of op kernels and FGradients for tests.
#include "tests/ops/op_harness.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>

#include "tests/ops/op_harness_internal.h"

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

// float16 / bfloat16 bit patterns from and to float, rounding to nearest even.
uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // NaN stays NaN (quiet), infinity infinity
    return static_cast<uint16_t>(sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (abs < 0x38800000u) {  // below the smallest normal half: a subnormal (or zero)
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    // value = mant * 2^(e-150); in units of the smallest subnormal (2^-24): mant >> (126 - e).
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int drop = 126 - static_cast<int>(abs >> 23);  // 14..24
    const uint32_t kept = mant >> drop, rem = mant & ((1u << drop) - 1), half = 1u << (drop - 1);
    const uint32_t r = kept + ((rem > half || (rem == half && (kept & 1u))) ? 1u : 0u);
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = ((abs >> 13) - (112u << 10));  // rebias exponent 127 -> 15
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // may carry into the exponent
  return static_cast<uint16_t>(sign | r);
}
float half_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  uint32_t x = exp == 31 ? (sign | 0x7f800000u | (mant << 13))
                         : (sign | ((exp + 112u) << 23) | (mant << 13));
  std::memcpy(&f, &x, 4);
  return f;
}
uint16_t float_to_bfloat(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}
float bfloat_to_float(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

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
  if (t.dtype == DType::kFloat16 || t.dtype == DType::kBFloat16) {
    auto* p = static_cast<uint16_t*>(dst);
    const bool half = t.dtype == DType::kFloat16;
    for (size_t i = 0; i < t.data.size(); ++i) {
      const float f = static_cast<float>(t.data[i]);
      p[i] = half ? float_to_half(f) : float_to_bfloat(f);
    }
    return;
  }
  WEFT_DTYPE_SWITCH(t.dtype, DT, "test harness", store<DT>(dst, t.data));
}
void from_buffer(HostTensor& t, const void* src) {
  const size_t n = static_cast<size_t>(t.shape.size());
  if (t.dtype == DType::kFloat16 || t.dtype == DType::kBFloat16) {
    const auto* p = static_cast<const uint16_t*>(src);
    const bool half = t.dtype == DType::kFloat16;
    t.data.resize(n);
    for (size_t i = 0; i < n; ++i) t.data[i] = half ? half_to_float(p[i]) : bfloat_to_float(p[i]);
    return;
  }
  WEFT_DTYPE_SWITCH(t.dtype, DT, "test harness", load<DT>(src, t.data, n));
}

size_t bytes_of(const HostTensor& t) { return t.data.size() * dtype_size(t.dtype); }

// The memory of one run: host buffers, and on CUDA device buffers beside them.
class RunMemory {
 public:
  explicit RunMemory(Device device) : device_(device) {
    if (device.type == DeviceType::kCUDA) {
#if WEFT_USE_CUDA
      WEFT_CHECK(device.id == 0) << "the op harness runs CUDA kernels on cuda:0 only";
      cuda_ = std::make_unique<detail::CudaScratch>();
#else
      WEFT_THROW(NotImplemented) << "the op harness cannot run on " << to_string(device)
                                 << ": this build has no CUDA";
#endif
    } else {
      WEFT_CHECK(device.type == DeviceType::kCPU)
          << "the op harness cannot run on " << to_string(device);
    }
  }
  // Memory for `t` on the device, holding its values.
  void* put(const HostTensor& t) {
    host_.push_back(std::make_unique<Buffer>(bytes_of(t)));
    to_buffer(t, host_.back()->ptr);
#if WEFT_USE_CUDA
    if (cuda_) {
      void* d = cuda_->alloc(bytes_of(t));
      cuda_->upload(d, host_.back()->ptr, bytes_of(t));
      return d;
    }
#endif
    return host_.back()->ptr;
  }
  // Zeroed scratch memory on the device.
  void* scratch(size_t bytes) {
#if WEFT_USE_CUDA
    if (cuda_) return cuda_->alloc(bytes);
#endif
    host_.push_back(std::make_unique<Buffer>(bytes));
    return host_.back()->ptr;
  }
  // Reads `t`'s values back from `ptr` (memory from put()).
  void get(HostTensor& t, const void* ptr) {
#if WEFT_USE_CUDA
    if (cuda_) {
      Buffer staging(bytes_of(t));
      cuda_->download(staging.ptr, ptr, bytes_of(t));
      from_buffer(t, staging.ptr);
      return;
    }
#endif
    from_buffer(t, ptr);
  }
  void set_context(OpContext& ctx) {
    ctx.run.device = device_;
#if WEFT_USE_CUDA
    if (cuda_) {
      ctx.run.stream = cuda_->stream();
      ctx.temp_allocator = cuda_->temp_allocator();
    }
#endif
  }
  void synchronize() {
#if WEFT_USE_CUDA
    if (cuda_) cuda_->synchronize();
#endif
  }

 private:
  Device device_;
  std::vector<std::unique_ptr<Buffer>> host_;
#if WEFT_USE_CUDA
  std::unique_ptr<detail::CudaScratch> cuda_;
#endif
};

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
  const Device device = options.device;
  RunMemory memory(device);
  std::vector<TensorView> in_views, out_views;
  for (int i = 0; i < nin; ++i) {
    in_views.emplace_back(memory.put(inputs[i]), device, inputs[i].dtype, inputs[i].shape);
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
    out_views.emplace_back(memory.put(outputs[i]), device, out_types[i], outputs[i].shape);
  }
  std::vector<OpReq> req = options.req;
  if (req.empty()) req.assign(nout, OpReq::kWrite);
  WEFT_CHECK(static_cast<int>(req.size()) == nout) << "req must have one entry per output";

  OpContext ctx;
  ctx.is_train = options.is_train;
  memory.set_context(ctx);
  ctx.num_threads = options.num_threads;
  RandomState random;
  random.engine.seed(options.seed);
  random.seed = options.seed;
  if (const auto& f = op.resource_request(options.device.type)) {
    for (const auto& r : f(attrs, in_shapes, out_shapes)) {
      if (r.kind == ResourceRequest::Kind::kWorkspace) {
        ctx.workspace = memory.scratch(r.bytes);
        ctx.workspace_bytes = r.bytes;
      } else {
        ctx.random = &random;
      }
    }
  }
  std::shared_ptr<OpState> state;  // kept until the device has finished
  if (const FCompute* fc = op.compute(device.type)) {
    (*fc)(attrs, ctx, in_views, req, out_views);
  } else if (const FStatefulCompute* fs = op.stateful_compute(device.type)) {
    const auto& create = op.attr<FCreateOpState>();
    WEFT_CHECK(static_cast<bool>(create))
        << attrs.where() << ": stateful op without FCreateOpState";
    state = create(attrs, device, in_shapes, in_types);
    (*fs)(*state, ctx, in_views, req, out_views);
  } else {
    WEFT_THROW(NotImplemented) << attrs.where() << " has no "
                               << (device.type == DeviceType::kCUDA ? "CUDA" : "CPU") << " kernel";
  }
  memory.synchronize();
  for (int i = 0; i < nout; ++i) memory.get(outputs[i], out_views[i].raw());
  if (write_back_mutated) {
    if (const auto& f = op.attr<FMutateInputs>()) {
      for (int i : f(attrs)) memory.get(inputs[i], in_views[i].raw());
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
    o.device = options_.device;
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

bool cuda_available() {
#if WEFT_USE_CUDA
  static const bool available = detail::cuda_device_present();
  return available;
#else
  return false;
#endif
}

HostTensor detail::cast_to(const HostTensor& t, DType to) {
  HostTensor out = t;
  out.dtype = to;
  if (t.empty()) return out;
  Buffer buffer(bytes_of(out));
  to_buffer(out, buffer.ptr);
  from_buffer(out, buffer.ptr);
  return out;
}

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
  HostTensor t = of(std::move(shape), std::move(v), dtype);
  if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) t = detail::cast_to(t, dtype);
  return t;
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
