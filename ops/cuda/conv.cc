// CUDA kernels: the cudnn family (see ops/cuda/register.h). This file: the cuDNN convolution
// helpers of cudnn_conv.h and the Convolution / Deconvolution kernels built on them; the other
// ops of the family are in cudnn_nn.cc.
//
// Note [cuDNN algorithm choice]: an algorithm is chosen once per (direction, geometry, dtype,
// device) and kept in a process-wide map under a mutex. By default the choice is the ranking of
// cudnnGet*Algorithm_v7 (heuristics; nothing runs). With WEFT_CUDNN_ALGO=measure it is measured,
// as MXNet's cudnn_tune=fastest and PyTorch's cudnn.benchmark do: cudnnFind*AlgorithmEx times
// the candidates on the operation's own inputs, writing into a scratch output of the result's
// size (so an output that is accumulated into is never clobbered by a trial), with up to
// kTrialWorkspace of scratch workspace, at the cost of one host wait the first time a geometry
// runs. Measured is not the default because it measured slower on an H100 (2026-11-28,
// docs/GPU.md): the 3×3 64→64 56² b32 convolution took 0.33 ms in float32 and 0.16 ms in
// bfloat16 with the measured pick, 0.27 and 0.089 ms with the heuristics' (each trial runs
// once, cold, so the search ranks by first-run times). float32 and float64 run in
// CUDNN_FMA_MATH (no TF32) and skip the FFT and Winograd algorithms when another one works, so
// results match the CPU's direct sums to rounding; float16/bfloat16 allow tensor cores and
// accumulate in float. The workspace comes from Scratch on the op's stream.
#include <cudnn.h>

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/env.h"
#include "ops/cuda/conv_bias_grad.h"
#include "ops/cuda/cudnn_conv.h"
#include "ops/cuda/kernel_util.h"
#include "ops/cuda/register.h"
#include "ops/defs/deconv_params.h"

namespace weft::cuda {
namespace {

using detail::ConvGeom;

cudnnDataType_t cudnn_type(DType t) {
  switch (t) {
    case DType::kFloat32:
      return CUDNN_DATA_FLOAT;
    case DType::kFloat64:
      return CUDNN_DATA_DOUBLE;
    case DType::kFloat16:
      return CUDNN_DATA_HALF;
    case DType::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      WEFT_THROW(NotImplemented) << "cuDNN convolution: no CUDA kernel for dtype " << dtype_name(t);
  }
}

/// alpha = 1 and beta = 0 or 1 in the scaling type cuDNN wants (double for double data).
struct Scales {
  double one_d = 1.0, beta_d;
  float one_f = 1.0f, beta_f;
  bool dbl;
  Scales(DType t, bool add) : beta_d(add ? 1.0 : 0.0), beta_f(add ? 1.0f : 0.0f) {
    dbl = t == DType::kFloat64;
  }
  const void* alpha() const { return dbl ? static_cast<const void*>(&one_d) : &one_f; }
  const void* beta() const { return dbl ? static_cast<const void*>(&beta_d) : &beta_f; }
};

std::vector<int> compact_strides(const std::vector<int>& dims) {
  std::vector<int> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

int checked_int(int64_t v) {
  WEFT_CHECK(v <= INT32_MAX) << "cuDNN convolution: dimension " << v << " exceeds 32 bits";
  return static_cast<int>(v);
}

/// The descriptors of one convolution; 1-D and 2-D convolutions are 2-D for cuDNN.
struct ConvDescs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int dev;

  ConvDescs(const ConvGeom& g, DType dtype, int device) : dev(device) {
    const cudnnDataType_t t = cudnn_type(dtype);
    const int first = g.nsp == 3 ? 0 : 1;  // spatial slots used
    const int nsp = 3 - first;
    std::vector<int> xd{checked_int(g.batch), checked_int(g.in_c)},
        yd{checked_int(g.batch), checked_int(g.out_c)},
        wd{checked_int(g.out_c), checked_int(g.in_cg())};
    std::vector<int> pad, stride, dil;
    for (int i = first; i < 3; ++i) {
      xd.push_back(checked_int(g.in[i]));
      yd.push_back(checked_int(g.out[i]));
      wd.push_back(checked_int(g.k[i]));
      pad.push_back(checked_int(g.p[i]));
      stride.push_back(checked_int(g.s[i]));
      dil.push_back(checked_int(g.d[i]));
    }
    WEFT_CUDA_CALL(cudnnCreateTensorDescriptor(&x), dev);
    WEFT_CUDA_CALL(cudnnCreateTensorDescriptor(&y), dev);
    WEFT_CUDA_CALL(cudnnCreateFilterDescriptor(&w), dev);
    WEFT_CUDA_CALL(cudnnCreateConvolutionDescriptor(&conv), dev);
    const auto xs = compact_strides(xd), ys = compact_strides(yd);
    WEFT_CUDA_CALL(
        cudnnSetTensorNdDescriptor(x, t, static_cast<int>(xd.size()), xd.data(), xs.data()), dev);
    WEFT_CUDA_CALL(
        cudnnSetTensorNdDescriptor(y, t, static_cast<int>(yd.size()), yd.data(), ys.data()), dev);
    WEFT_CUDA_CALL(
        cudnnSetFilterNdDescriptor(w, t, CUDNN_TENSOR_NCHW, static_cast<int>(wd.size()), wd.data()),
        dev);
    const bool half = dtype == DType::kFloat16 || dtype == DType::kBFloat16;
    const cudnnDataType_t compute = dtype == DType::kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    WEFT_CUDA_CALL(cudnnSetConvolutionNdDescriptor(conv, nsp, pad.data(), stride.data(), dil.data(),
                                                   CUDNN_CROSS_CORRELATION, compute),
                   dev);
    WEFT_CUDA_CALL(cudnnSetConvolutionGroupCount(conv, checked_int(g.groups)), dev);
    WEFT_CUDA_CALL(cudnnSetConvolutionMathType(conv, half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
                   dev);
  }
  ~ConvDescs() {
    cudnnDestroyTensorDescriptor(x);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyConvolutionDescriptor(conv);
  }
  ConvDescs(const ConvDescs&) = delete;
  ConvDescs& operator=(const ConvDescs&) = delete;
};

enum class Dir { kFwd, kBwdData, kBwdFilter };

struct AlgoChoice {
  int algo = 0;
  size_t ws = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

std::string algo_key(Dir dir, const ConvGeom& g, DType dtype, int device) {
  std::string k = std::to_string(static_cast<int>(dir)) + "|" + std::to_string(device) + "|" +
                  std::to_string(static_cast<int>(dtype)) + "|" + std::to_string(g.nsp);
  for (int64_t v : {g.batch, g.in_c, g.out_c, g.groups}) k += "," + std::to_string(v);
  for (const auto* a : {&g.in, &g.out, &g.k, &g.s, &g.d, &g.p})
    for (int64_t v : *a) k += "," + std::to_string(v);
  return k;
}

/// Whether an algorithm computes the plain sums (no FFT or Winograd transforms).
bool direct(Dir dir, int algo) {
  switch (dir) {
    case Dir::kFwd:
      return algo != CUDNN_CONVOLUTION_FWD_ALGO_FFT &&
             algo != CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING &&
             algo != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD &&
             algo != CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    case Dir::kBwdData:
      return algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT &&
             algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING &&
             algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD &&
             algo != CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    case Dir::kBwdFilter:
      return algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT &&
             algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING &&
             algo != CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
  }
  return true;
}

// Picks from the heuristics' ranking (best first): the first working algorithm, for
// float32/float64 the first direct one in FMA math when there is one.
template <typename Perf>
AlgoChoice pick(Dir dir, const Perf* perf, int count, bool need_direct) {
  const Perf* first = nullptr;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (!first) first = &perf[i];
    // CUDNN_DEFAULT_MATH may use TF32 on Ampere and later: float32/float64 want FMA only.
    if (!need_direct ||
        (direct(dir, static_cast<int>(perf[i].algo)) && perf[i].mathType == CUDNN_FMA_MATH))
      return {static_cast<int>(perf[i].algo), perf[i].memory, perf[i].mathType};
  }
  WEFT_CHECK(first != nullptr) << "cuDNN found no convolution algorithm for this geometry";
  return {static_cast<int>(first->algo), first->memory, first->mathType};
}

/// The inputs of a trial: the two operands the direction reads and the size of what it writes.
struct TrialArgs {
  const void* a;
  const void* b;
  size_t out_bytes;
};

constexpr size_t kTrialWorkspace = size_t{256} << 20;

bool measure_algorithms() {
  static const bool measure = [] {
    try {
      const std::optional<std::string> v = read_environment().cudnn_algo;
      return v && *v == "measure";
    } catch (const Error&) {
      return false;  // a malformed WEFT_* variable: its own reader reports it
    }
  }();
  return measure;
}

/// The heuristics' ranking (nothing runs on the device).
AlgoChoice rank(Dir dir, const ConvDescs& d, cudnnHandle_t h, bool need_direct) {
  constexpr int kMax = 16;
  int count = 0;
  if (dir == Dir::kFwd) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMax];
    WEFT_CUDA_CALL(
        cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, kMax, &count, perf),
        d.dev);
    return pick(dir, perf, count, need_direct);
  }
  if (dir == Dir::kBwdData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
    WEFT_CUDA_CALL(
        cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, kMax, &count, perf),
        d.dev);
    return pick(dir, perf, count, need_direct);
  }
  cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
  WEFT_CUDA_CALL(
      cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, kMax, &count, perf),
      d.dev);
  return pick(dir, perf, count, need_direct);
}

/// The measured ranking (Note [cuDNN algorithm choice]): runs the candidates on the trial's
/// operands into scratch memory and picks the fastest allowed one.
AlgoChoice measure(Dir dir, const ConvDescs& d, cudnnHandle_t h, bool need_direct,
                   const OpContext& ctx, const TrialArgs& t, size_t min_ws) {
  const Stream& stream = ctx.run.stream;
  DataPtr out = ctx.temp_allocator->allocate_on(t.out_bytes, stream);
  DataPtr ws;
  size_t ws_bytes = std::max(kTrialWorkspace, min_ws);
  try {
    ws = ctx.temp_allocator->allocate_on(ws_bytes, stream);
  } catch (const OutOfMemory&) {
    ws_bytes = min_ws;
    if (ws_bytes != 0) ws = ctx.temp_allocator->allocate_on(ws_bytes, stream);
  }
  constexpr int kMax = 16;
  int count = 0;
  if (dir == Dir::kFwd) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMax];
    WEFT_CUDA_CALL(
        cudnnFindConvolutionForwardAlgorithmEx(h, d.x, t.a, d.w, t.b, d.conv, d.y, out.get(), kMax,
                                               &count, perf, ws.get(), ws_bytes),
        d.dev);
    return pick(dir, perf, count, need_direct);
  }
  if (dir == Dir::kBwdData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
    WEFT_CUDA_CALL(
        cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.w, t.a, d.y, t.b, d.conv, d.x, out.get(),
                                                    kMax, &count, perf, ws.get(), ws_bytes),
        d.dev);
    return pick(dir, perf, count, need_direct);
  }
  cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
  WEFT_CUDA_CALL(
      cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d.x, t.a, d.y, t.b, d.conv, d.w, out.get(),
                                                    kMax, &count, perf, ws.get(), ws_bytes),
      d.dev);
  return pick(dir, perf, count, need_direct);
}

AlgoChoice choose(Dir dir, const ConvDescs& d, const ConvGeom& g, DType dtype, const OpContext& ctx,
                  const TrialArgs& trial) {
  static std::mutex mu;
  static std::unordered_map<std::string, AlgoChoice> cache;
  const std::string key = algo_key(dir, g, dtype, device_of(ctx));
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  cudnnHandle_t h = handles(ctx).cudnn;
  const bool need_direct = dtype == DType::kFloat32 || dtype == DType::kFloat64;
  AlgoChoice c = rank(dir, d, h, need_direct);
  if (measure_algorithms() && ctx.temp_allocator != nullptr) {
    try {
      c = measure(dir, d, h, need_direct, ctx, trial, c.ws);
    } catch (const Error&) {
      // No trial memory, or cuDNN refused the search: keep the heuristics' choice.
    }
  }
  // The ranking's memory figure can be stale for the math type; ask for the exact size.
  WEFT_CUDA_CALL(cudnnSetConvolutionMathType(d.conv, c.math), d.dev);
  if (dir == Dir::kFwd) {
    WEFT_CUDA_CALL(
        cudnnGetConvolutionForwardWorkspaceSize(
            h, d.x, d.w, d.conv, d.y, static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), &c.ws),
        d.dev);
  } else if (dir == Dir::kBwdData) {
    WEFT_CUDA_CALL(
        cudnnGetConvolutionBackwardDataWorkspaceSize(
            h, d.w, d.y, d.conv, d.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), &c.ws),
        d.dev);
  } else {
    WEFT_CUDA_CALL(
        cudnnGetConvolutionBackwardFilterWorkspaceSize(
            h, d.x, d.y, d.conv, d.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), &c.ws),
        d.dev);
  }
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace(key, c);
  return c;
}

bool empty(const ConvGeom& g) {
  return g.batch == 0 || g.in_c == 0 || g.out_c == 0 || g.in_size() == 0 || g.out_size() == 0;
}

void zero(const OpContext& ctx, void* p, int64_t elems, DType dtype) {
  if (elems <= 0) return;
  memset_on_stream(ctx, p, 0, static_cast<size_t>(elems) * dtype_size(dtype));
}

}  // namespace

void cudnn_conv_forward(const OpContext& ctx, const ConvGeom& g, DType dtype, const void* x,
                        const void* w, void* y, bool add) {
  if (empty(g)) {
    if (!add) zero(ctx, y, g.batch * g.out_c * g.out_size(), dtype);
    return;
  }
  ConvDescs d(g, dtype, device_of(ctx));
  const size_t y_bytes = static_cast<size_t>(g.batch * g.out_c * g.out_size()) * dtype_size(dtype);
  const AlgoChoice c = choose(Dir::kFwd, d, g, dtype, ctx, TrialArgs{x, w, y_bytes});
  WEFT_CUDA_CALL(cudnnSetConvolutionMathType(d.conv, c.math), d.dev);
  Scratch ws(ctx, c.ws);
  const Scales s(dtype, add);
  WEFT_CUDA_CALL(cudnnConvolutionForward(handles(ctx).cudnn, s.alpha(), d.x, x, d.w, w, d.conv,
                                         static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), ws.get(),
                                         c.ws, s.beta(), d.y, y),
                 d.dev);
}

void cudnn_conv_backward_data(const OpContext& ctx, const ConvGeom& g, DType dtype, const void* dy,
                              const void* w, void* dx, bool add) {
  if (empty(g)) {
    if (!add) zero(ctx, dx, g.batch * g.in_c * g.in_size(), dtype);
    return;
  }
  ConvDescs d(g, dtype, device_of(ctx));
  const size_t dx_bytes = static_cast<size_t>(g.batch * g.in_c * g.in_size()) * dtype_size(dtype);
  const AlgoChoice c = choose(Dir::kBwdData, d, g, dtype, ctx, TrialArgs{w, dy, dx_bytes});
  WEFT_CUDA_CALL(cudnnSetConvolutionMathType(d.conv, c.math), d.dev);
  Scratch ws(ctx, c.ws);
  const Scales s(dtype, add);
  WEFT_CUDA_CALL(
      cudnnConvolutionBackwardData(handles(ctx).cudnn, s.alpha(), d.w, w, d.y, dy, d.conv,
                                   static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), ws.get(),
                                   c.ws, s.beta(), d.x, dx),
      d.dev);
}

void cudnn_conv_backward_filter(const OpContext& ctx, const ConvGeom& g, DType dtype, const void* x,
                                const void* dy, void* dw, bool add) {
  if (empty(g)) {
    if (!add) zero(ctx, dw, g.out_c * g.col_rows(), dtype);
    return;
  }
  ConvDescs d(g, dtype, device_of(ctx));
  const size_t dw_bytes = static_cast<size_t>(g.out_c * g.col_rows()) * dtype_size(dtype);
  const AlgoChoice c = choose(Dir::kBwdFilter, d, g, dtype, ctx, TrialArgs{x, dy, dw_bytes});
  WEFT_CUDA_CALL(cudnnSetConvolutionMathType(d.conv, c.math), d.dev);
  Scratch ws(ctx, c.ws);
  const Scales s(dtype, add);
  WEFT_CUDA_CALL(
      cudnnConvolutionBackwardFilter(handles(ctx).cudnn, s.alpha(), d.x, x, d.y, dy, d.conv,
                                     static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), ws.get(),
                                     c.ws, s.beta(), d.w, dw),
      d.dev);
}

namespace {
/// A (batch, channels, size, 1) tensor descriptor and its (1, channels, 1, 1) bias descriptor.
struct BiasDescs {
  cudnnTensorDescriptor_t y = nullptr, b = nullptr;
  BiasDescs(DType dtype, int64_t batch, int64_t channels, int64_t size, int dev) {
    const cudnnDataType_t t = cudnn_type(dtype);
    WEFT_CUDA_CALL(cudnnCreateTensorDescriptor(&y), dev);
    WEFT_CUDA_CALL(cudnnCreateTensorDescriptor(&b), dev);
    WEFT_CUDA_CALL(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, t, checked_int(batch),
                                              checked_int(channels), checked_int(size), 1),
                   dev);
    WEFT_CUDA_CALL(
        cudnnSetTensor4dDescriptor(b, CUDNN_TENSOR_NCHW, t, 1, checked_int(channels), 1, 1), dev);
  }
  ~BiasDescs() {
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(b);
  }
  BiasDescs(const BiasDescs&) = delete;
  BiasDescs& operator=(const BiasDescs&) = delete;
};
}  // namespace

void cudnn_add_channel_bias(const OpContext& ctx, DType dtype, void* y, const void* b,
                            int64_t batch, int64_t channels, int64_t size) {
  if (batch == 0 || channels == 0 || size == 0) return;
  BiasDescs d(dtype, batch, channels, size, device_of(ctx));
  const Scales s(dtype, true);
  WEFT_CUDA_CALL(cudnnAddTensor(handles(ctx).cudnn, s.alpha(), d.b, b, s.beta(), d.y, y),
                 device_of(ctx));
}

void cudnn_channel_bias_grad(const OpContext& ctx, DType dtype, const void* dy, int64_t batch,
                             int64_t channels, int64_t size, void* db, bool add) {
  if (channels == 0) return;
  if (batch == 0 || size == 0) {
    if (!add) zero(ctx, db, channels, dtype);
    return;
  }
  // cudnnConvolutionBackwardBias answers NOT_SUPPORTED for bfloat16: one reduction of weft's
  // serves every type.
  channel_bias_grad(ctx, dtype, dy, batch, channels, size, db, add);
}

namespace {

using detail::ConvolutionParam;
using detail::DeconvolutionParam;

bool writes(OpReq r) { return r != OpReq::kNull; }
bool adds(OpReq r) { return r == OpReq::kAdd; }

// in: data, weight[, bias]; out: output.
void conv_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                  std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<ConvolutionParam>();
  const ConvGeom g = detail::conv_geom(p, in[0].shape_of(), out[0].shape_of());
  const DType dt = in[0].dtype();
  cudnn_conv_forward(ctx, g, dt, in[0].raw(), in[1].raw(), out[0].raw(), adds(req[0]));
  if (!p.no_bias)
    cudnn_add_channel_bias(ctx, dt, out[0].raw(), in[2].raw(), g.batch, g.out_c, g.out_size());
}

// in: out_grad, data, weight; out: d_data, d_weight[, d_bias].
void conv_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                   std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<ConvolutionParam>();
  const ConvGeom g = detail::conv_geom(p, in[1].shape_of(), in[0].shape_of());
  const DType dt = in[0].dtype();
  if (writes(req[0]))
    cudnn_conv_backward_data(ctx, g, dt, in[0].raw(), in[2].raw(), out[0].raw(), adds(req[0]));
  if (writes(req[1]))
    cudnn_conv_backward_filter(ctx, g, dt, in[1].raw(), in[0].raw(), out[1].raw(), adds(req[1]));
  if (!p.no_bias && writes(req[2]))
    cudnn_channel_bias_grad(ctx, dt, in[0].raw(), g.batch, g.out_c, g.out_size(), out[2].raw(),
                            adds(req[2]));
}

// The deconvolution is the transposed convolution's data gradient (deconv_geom: the convolution
// whose input is the deconvolution's output).
void deconv_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                    std::span<const OpReq> req, std::span<const TensorView> out) {
  if (req[0] == OpReq::kNull) return;
  const auto& p = attrs.params<DeconvolutionParam>();
  const ConvGeom g = detail::deconv_geom(attrs, in[0].shape_of(), out[0].shape_of());
  const DType dt = in[0].dtype();
  cudnn_conv_backward_data(ctx, g, dt, in[0].raw(), in[1].raw(), out[0].raw(), adds(req[0]));
  if (!p.no_bias)
    cudnn_add_channel_bias(ctx, dt, out[0].raw(), in[2].raw(), g.batch, g.in_c, g.in_size());
}

// in: out_grad, data, weight; out: d_data, d_weight[, d_bias].
void deconv_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                     std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<DeconvolutionParam>();
  const ConvGeom g = detail::deconv_geom(attrs, in[1].shape_of(), in[0].shape_of());
  const DType dt = in[0].dtype();
  if (writes(req[0]))
    cudnn_conv_forward(ctx, g, dt, in[0].raw(), in[2].raw(), out[0].raw(), adds(req[0]));
  if (writes(req[1]))
    cudnn_conv_backward_filter(ctx, g, dt, in[0].raw(), in[1].raw(), out[1].raw(), adds(req[1]));
  if (!p.no_bias && writes(req[2]))
    cudnn_channel_bias_grad(ctx, dt, in[0].raw(), g.batch, g.in_c, g.in_size(), out[2].raw(),
                            adds(req[2]));
}

}  // namespace

void register_cudnn_nn_kernels(OpRegistry& r);     // cudnn_nn.cc
void register_cudnn_fused_kernels(OpRegistry& r);  // conv_fused.cc

void register_cudnn_kernels(OpRegistry& r) {
  r.kernels("Convolution").set_attr<FCompute>(DeviceType::kCUDA, conv_forward);
  r.kernels("_backward_Convolution").set_attr<FCompute>(DeviceType::kCUDA, conv_backward);
  r.kernels("Deconvolution").set_attr<FCompute>(DeviceType::kCUDA, deconv_forward);
  r.kernels("_backward_Deconvolution").set_attr<FCompute>(DeviceType::kCUDA, deconv_backward);
  register_cudnn_nn_kernels(r);
  register_cudnn_fused_kernels(r);
}

}  // namespace weft::cuda
