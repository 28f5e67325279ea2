// CUDA kernels: the rnn family's cuDNN implementation (see cudnn_rnn.h): `RNN` and
// `_backward_RNN` through cudnnRNNForward, cudnnRNNBackwardData_v8 and
// cudnnRNNBackwardWeights_v8 (cuDNN ≥ 8 API), in padded sequence-major layout.
//
// Note [cuDNN RNN coverage]
// cuDNN computes the recurrences of ops/cpu/rnn_cell.h exactly (LSTM i, f, g, o with
// c' = f·c + i·g and h = o·tanh(c'); GRU h̃ = tanh(W x + b_W + r·(R h + b_R)) and
// h = (1 − z)·h̃ + z·h; plain RNNs act(W x + b_W + R h + b_R)), with two bias vectors per gate
// (CUDNN_RNN_DOUBLE_BIAS), stacked and bidirectional layers in the same state order (l·D + dir)
// and output order ([forward H | backward H]). It declines (the caller, ops/cuda/rnn.cc, runs
// weft's own kernels) when it would not compute the same thing:
//  - dropout between layers in training, and any `_backward_RNN` with a dropout mask input: the
//    mask is weft's (Note [RNN dropout mask], Note [RNN on CUDA]), not cuDNN's;
//  - LSTM cell clipping: cudnnRNNSetClip_v9 has no NaN option, and the gradient at the bounds is
//    not documented to be weft's;
//  - a sequence of length 0 (after clamping to [0, T]), which cuDNN's padded layout is not
//    documented to accept; empty tensors; sizes beyond cuDNN's 32-bit integers.
// projection_size never reaches a kernel (shape inference rejects it). float16 and bfloat16 have
// no fallback: declining them throws NotImplemented, as does cuDNN refusing them.
//
// Note [cuDNN RNN weights]
// cuDNN's weight space is opaque. cudnnGetRNNWeightParams gives, for a pseudo-layer (l·D + dir)
// and a linLayerID, the address of one gate's H × in matrix and of its bias in the space. IDs
// 0 … G−1 are the gates of the input GEMM and G … 2G−1 those of the recurrent GEMM, in cuDNN's
// documented gate orders (LSTM: input, forget, new memory, output; GRU: reset, update, new
// memory), which are MXNet's orders (i, f, g, o; r, z, n). Gate k of the packed W_i2h
// (ops/defs/rnn_packing.h, G·H × in row-major) is its rows k·H … k·H + H − 1, i.e. the H × in
// row-major block cuDNN holds for ID k; likewise W_h2h, b_i2h (IDs < G) and b_h2h (IDs ≥ G).
// The map is a list of blocks (weight-space offset, packed offset, count), merged where they are
// consecutive in both layouts, copied with copy_on_stream on the op's stream: packed → space
// before a run, space → packed gradient after cudnnRNNBackwardWeights_v8.
//
// Note [cuDNN RNN sequence lengths]
// cuDNN takes the lengths on the host (the data descriptors) and on the device. With
// use_sequence_length the op therefore copies sequence_length to the host and waits for its
// stream: one synchronisation per call. Lengths are clamped to [0, T] as the fallback reads them
// (Note [RNN on CUDA]). The op zeroes the padded rows (t ≥ length) of the output and of the data
// gradient itself, so neither depends on cuDNN's padding fill; padded rows of the output gradient
// are never read.
//
// Descriptors are made per call (cheap: CUDNN_RNN_ALGO_STANDARD builds no plan). float32 runs in
// CUDNN_FMA_MATH (no TF32), float64 in the default math, float16/bfloat16 in tensor-op math with
// float accumulation.
#include "ops/cuda/cudnn_rnn.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <vector>

#include "ops/cuda/kernel_util.h"
#include "ops/cuda/rnn_kernels.h"
#include "ops/defs/rnn_params.h"

namespace weft::cuda {
namespace {

using detail::RnnParam;
namespace rnn = detail::rnn;

// Relaxed: the counters order nothing; a test reads them after its kernels returned.
std::atomic<uint64_t> cudnn_runs{0};
std::atomic<uint64_t> fallback_runs{0};

bool is_half(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

/// The cuDNN type of `t`; false for types the cuDNN path does not take.
bool cudnn_type(DType t, cudnnDataType_t* out) {
  switch (t) {
    case DType::kFloat32:
      *out = CUDNN_DATA_FLOAT;
      return true;
    case DType::kFloat64:
      *out = CUDNN_DATA_DOUBLE;
      return true;
    case DType::kFloat16:
      *out = CUDNN_DATA_HALF;
      return true;
    case DType::kBFloat16:
      *out = CUDNN_DATA_BFLOAT16;
      return true;
    default:
      return false;
  }
}

/// A cuDNN descriptor, destroyed with its owner. Created empty; create() makes it.
template <typename T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
struct Desc {
  T d = nullptr;
  Desc() = default;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  ~Desc() {
    if (d != nullptr) Destroy(d);
  }
  void create(int dev, const char* what) { check(Create(&d), what, dev); }
};
using TensorDesc =
    Desc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using DropoutDesc =
    Desc<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor, cudnnDestroyDropoutDescriptor>;
using RnnDesc = Desc<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using DataDesc =
    Desc<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor, cudnnDestroyRNNDataDescriptor>;

/// Why cuDNN cannot run this application (Note [cuDNN RNN coverage]), or null when it can.
/// `dropout`: a dropout mask takes part.
const char* unsupported(const RnnParam& p, const rnn::RnnDims& d, bool dropout) {
  if (p.projection_size) return "projection_size";
  if (p.lstm() && p.lstm_state_clip_min) return "LSTM cell clipping (lstm_state_clip_min/max)";
  if (dropout) return "dropout between layers (p > 0) in training";
  if (d.T <= 0 || d.N <= 0 || d.I <= 0) return "empty inputs";
  const int64_t DH = d.D * d.H;
  for (int64_t v :
       {d.T, d.N, d.I, d.H, d.L * d.D, d.T * d.N * std::max(d.I, DH), d.L * d.D * d.N * d.H,
        (d.L - 1) * d.T * d.N * DH, rnn::param_size(d.mode, d.L, d.D, d.I, d.H)}) {
    if (v > INT32_MAX) return "sizes beyond 32-bit integers";
  }
  return nullptr;
}

/// Declines (returns false), or for float16/bfloat16, which have no fallback, throws.
bool decline(const OpAttrs& attrs, DType dtype, const char* why) {
  WEFT_CHECK_AS(NotImplemented, !is_half(dtype))
      << attrs.where() << ": dtype " << dtype_name(dtype)
      << " runs only through cuDNN, which this kernel does not use for " << why;
  return false;
}

/// The sequence lengths on the host, clamped to [0, T]; every sequence T long without
/// sequence_length (Note [cuDNN RNN sequence lengths]).
std::vector<int32_t> host_lengths(const OpContext& ctx, const TensorView* lens,
                                  const rnn::RnnDims& d) {
  std::vector<int32_t> out(static_cast<size_t>(d.N), static_cast<int32_t>(d.T));
  if (lens == nullptr) return out;
  std::vector<int64_t> raw(static_cast<size_t>(d.N));
  {
    // The scratch is done with before the caller takes its own (both may be the workspace).
    Scratch tmp(ctx, raw.size() * sizeof(int64_t));
    rnn_lengths_to_i64(lens->dtype(), lens->raw(), tmp.as<int64_t>(), d.N, stream_of(ctx));
    copy_to_host_sync(ctx, raw.data(), tmp.get(), raw.size() * sizeof(int64_t));
  }
  for (size_t n = 0; n < raw.size(); ++n)
    out[n] = static_cast<int32_t>(std::clamp<int64_t>(raw[n], 0, d.T));
  return out;
}

/// The descriptors and space sizes of one application.
struct RnnDescs {
  int dev = 0;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  DropoutDesc dropout;
  RnnDesc rnn;
  DataDesc x, y;
  TensorDesc h;  ///< hx, hy, cx, cy and their gradients: (L·D, N, H)
  size_t weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  /// The padding fill of the data descriptors, kept beside them in case cuDNN reads it late.
  /// Zero bytes read as 0 in every float type; cuDNN reads one element of the data type.
  double fill = 0;
};

/// Checks a call that sets up cuDNN's RNN: for float16/bfloat16 a refusal is NotImplemented.
void setup_check(cudnnStatus_t st, const char* call, const OpAttrs& attrs, DType dtype, int dev) {
  if (st != CUDNN_STATUS_SUCCESS && is_half(dtype)) {
    WEFT_THROW(NotImplemented) << attrs.where() << ": cuDNN refuses an RNN in dtype "
                               << dtype_name(dtype) << " (" << call << ": "
                               << cudnnGetErrorString(st) << ")";
  }
  check(st, call, dev);
}

void build(RnnDescs& s, const OpAttrs& attrs, const OpContext& ctx, const rnn::RnnDims& d,
           DType dtype, const std::vector<int32_t>& lens, bool training) {
  s.dev = device_of(ctx);
  cudnnHandle_t handle = handles(ctx).cudnn;
  WEFT_ICHECK(cudnn_type(dtype, &s.type)) << "cuDNN RNN: no cuDNN type for " << dtype_name(dtype);
  // No dropout: a descriptor with p = 0 and no random states (nothing is drawn).
  s.dropout.create(s.dev, "cudnnCreateDropoutDescriptor");
  WEFT_CUDA_CALL(cudnnSetDropoutDescriptor(s.dropout.d, handle, 0.0f, nullptr, 0, 0), s.dev);
  s.rnn.create(s.dev, "cudnnCreateRNNDescriptor");
  cudnnRNNMode_t cell = CUDNN_LSTM;
  switch (d.mode) {
    case rnn::RnnMode::kRnnRelu:
      cell = CUDNN_RNN_RELU;
      break;
    case rnn::RnnMode::kRnnTanh:
      cell = CUDNN_RNN_TANH;
      break;
    case rnn::RnnMode::kLstm:
      cell = CUDNN_LSTM;
      break;
    case rnn::RnnMode::kGru:
      cell = CUDNN_GRU;
      break;
  }
  const cudnnDataType_t math_prec = dtype == DType::kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  const cudnnMathType_t math = is_half(dtype)             ? CUDNN_TENSOR_OP_MATH
                               : dtype == DType::kFloat32 ? CUDNN_FMA_MATH
                                                          : CUDNN_DEFAULT_MATH;
  const int H = static_cast<int>(d.H);
  setup_check(cudnnSetRNNDescriptor_v8(
                  s.rnn.d, CUDNN_RNN_ALGO_STANDARD, cell, CUDNN_RNN_DOUBLE_BIAS,
                  d.D == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, s.type,
                  math_prec, math, static_cast<int>(d.I), H, /*projSize=*/H, static_cast<int>(d.L),
                  s.dropout.d, CUDNN_RNN_PADDED_IO_ENABLED),
              "cudnnSetRNNDescriptor_v8", attrs, dtype, s.dev);
  s.x.create(s.dev, "cudnnCreateRNNDataDescriptor");
  s.y.create(s.dev, "cudnnCreateRNNDataDescriptor");
  setup_check(cudnnSetRNNDataDescriptor(s.x.d, s.type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                        static_cast<int>(d.T), static_cast<int>(d.N),
                                        static_cast<int>(d.I), lens.data(), &s.fill),
              "cudnnSetRNNDataDescriptor(x)", attrs, dtype, s.dev);
  setup_check(cudnnSetRNNDataDescriptor(s.y.d, s.type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
                                        static_cast<int>(d.T), static_cast<int>(d.N),
                                        static_cast<int>(d.D * d.H), lens.data(), &s.fill),
              "cudnnSetRNNDataDescriptor(y)", attrs, dtype, s.dev);
  s.h.create(s.dev, "cudnnCreateTensorDescriptor");
  const int dims[3] = {static_cast<int>(d.L * d.D), static_cast<int>(d.N), H};
  const int strides[3] = {static_cast<int>(d.N) * H, H, 1};
  WEFT_CUDA_CALL(cudnnSetTensorNdDescriptor(s.h.d, s.type, 3, dims, strides), s.dev);
  setup_check(cudnnGetRNNWeightSpaceSize(handle, s.rnn.d, &s.weight_bytes),
              "cudnnGetRNNWeightSpaceSize", attrs, dtype, s.dev);
  setup_check(cudnnGetRNNTempSpaceSizes(
                  handle, s.rnn.d, training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                  s.x.d, &s.work_bytes, &s.reserve_bytes),
              "cudnnGetRNNTempSpaceSizes", attrs, dtype, s.dev);
}

/// One run of elements in both weight layouts (Note [cuDNN RNN weights]).
struct Block {
  size_t space_byte = 0;  ///< byte offset in cuDNN's weight space
  int64_t packed = 0;     ///< element offset in the packed parameter vector
  int64_t count = 0;      ///< elements
};

int64_t elements(cudnnTensorDescriptor_t t, int dev) {
  cudnnDataType_t type;
  int nb = 0, dims[8], strides[8];
  WEFT_CUDA_CALL(cudnnGetTensorNdDescriptor(t, 8, &type, &nb, dims, strides), dev);
  int64_t n = 1;
  for (int i = 0; i < nb; ++i) n *= dims[i];
  return n;
}

/// The map between the packed parameters and cuDNN's weight space at `space`.
std::vector<Block> weight_blocks(const RnnDescs& s, const OpContext& ctx, const rnn::RnnDims& d,
                                 void* space, size_t elem_size) {
  TensorDesc mat, bias;
  mat.create(s.dev, "cudnnCreateTensorDescriptor");
  bias.create(s.dev, "cudnnCreateTensorDescriptor");
  cudnnHandle_t handle = handles(ctx).cudnn;
  const int64_t G = d.G(), H = d.H;
  std::vector<Block> blocks;
  for (int64_t l = 0; l < d.L; ++l) {
    for (int64_t dir = 0; dir < d.D; ++dir) {
      const rnn::ParamOffsets off = rnn::param_offsets(d, l, dir);
      for (int64_t id = 0; id < 2 * G; ++id) {
        const bool recurrent = id >= G;
        const int64_t gate = recurrent ? id - G : id, cols = recurrent ? H : d.layer_input(l);
        void* m = nullptr;
        void* b = nullptr;
        WEFT_CUDA_CALL(cudnnGetRNNWeightParams(handle, s.rnn.d, static_cast<int32_t>(l * d.D + dir),
                                               s.weight_bytes, space, static_cast<int32_t>(id),
                                               mat.d, &m, bias.d, &b),
                       s.dev);
        WEFT_ICHECK(m != nullptr && b != nullptr && elements(mat.d, s.dev) == H * cols &&
                    elements(bias.d, s.dev) == H)
            << "cuDNN RNN: unexpected weight block for layer " << l << ", direction " << dir
            << ", linLayerID " << id << " (want " << H << " x " << cols << " and " << H << ")";
        auto offset = [&](void* p) {
          return static_cast<size_t>(static_cast<char*>(p) - static_cast<char*>(space));
        };
        blocks.push_back(
            {offset(m), (recurrent ? off.w_h2h : off.w_i2h) + gate * H * cols, H * cols});
        blocks.push_back({offset(b), (recurrent ? off.b_h2h : off.b_i2h) + gate * H, H});
      }
    }
  }
  std::sort(blocks.begin(), blocks.end(),
            [](const Block& a, const Block& b) { return a.space_byte < b.space_byte; });
  std::vector<Block> merged;
  int64_t covered = 0;
  for (const Block& b : blocks) {
    covered += b.count;
    if (!merged.empty()) {
      Block& last = merged.back();
      if (last.space_byte + static_cast<size_t>(last.count) * elem_size == b.space_byte &&
          last.packed + last.count == b.packed) {
        last.count += b.count;
        continue;
      }
    }
    merged.push_back(b);
  }
  WEFT_ICHECK(covered == rnn::param_size(d.mode, d.L, d.D, d.I, d.H))
      << "cuDNN RNN: the weight blocks cover " << covered << " parameters";
  return merged;
}

/// Copies the packed parameters into the weight space (`to_space`) or back.
void copy_blocks(const OpContext& ctx, const std::vector<Block>& blocks, size_t elem_size,
                 void* space, void* packed, bool to_space) {
  for (const Block& b : blocks) {
    char* s = static_cast<char*>(space) + b.space_byte;
    char* p = static_cast<char*>(packed) + static_cast<size_t>(b.packed) * elem_size;
    copy_on_stream(ctx, to_space ? s : p, to_space ? p : s,
                   static_cast<size_t>(b.count) * elem_size);
  }
}

/// Zeroes rows t ≥ lens[n] of a (T, N, width) tensor.
void zero_padding(const OpContext& ctx, void* p, const std::vector<int32_t>& lens,
                  const rnn::RnnDims& d, int64_t width, size_t elem_size) {
  const size_t row = static_cast<size_t>(width) * elem_size;
  for (int64_t n = 0; n < d.N; ++n) {
    const int64_t len = lens[static_cast<size_t>(n)];
    if (len >= d.T) continue;
    char* first = static_cast<char*>(p) + static_cast<size_t>(len * d.N + n) * row;
    WEFT_CUDA_CALL(cudaMemset2DAsync(first, row * static_cast<size_t>(d.N), 0, row,
                                     static_cast<size_t>(d.T - len), stream_of(ctx)),
                   device_of(ctx));
  }
}

/// A (1, n, 1, 1) descriptor for the whole-tensor helpers below.
void flat_desc(TensorDesc& t, cudnnDataType_t type, int64_t n, int dev) {
  t.create(dev, "cudnnCreateTensorDescriptor");
  WEFT_CUDA_CALL(
      cudnnSetTensor4dDescriptor(t.d, CUDNN_TENSOR_NCHW, type, 1, static_cast<int>(n), 1, 1), dev);
}

/// dst += src over n elements.
void accumulate(const OpContext& ctx, DType dtype, const void* src, void* dst, int64_t n) {
  if (n <= 0) return;
  if (dtype == DType::kFloat32) {
    rnn_add<float>(static_cast<const float*>(src), static_cast<float*>(dst), n, stream_of(ctx));
  } else if (dtype == DType::kFloat64) {
    rnn_add<double>(static_cast<const double*>(src), static_cast<double*>(dst), n, stream_of(ctx));
  } else {
    cudnnDataType_t type;
    WEFT_ICHECK(cudnn_type(dtype, &type)) << "cuDNN RNN: no cuDNN type";
    TensorDesc t;
    flat_desc(t, type, n, device_of(ctx));
    const float one = 1.0f;  // float scaling for every non-double type
    WEFT_CUDA_CALL(cudnnAddTensor(handles(ctx).cudnn, &one, t.d, src, &one, t.d, dst),
                   device_of(ctx));
  }
}

/// dst = 1 over n elements (the dropout mask outside training).
void fill_ones(const OpContext& ctx, DType dtype, void* dst, int64_t n) {
  if (n <= 0) return;
  if (dtype == DType::kFloat32) {
    rnn_fill<float>(static_cast<float*>(dst), n, 1.0, stream_of(ctx));
  } else if (dtype == DType::kFloat64) {
    rnn_fill<double>(static_cast<double*>(dst), n, 1.0, stream_of(ctx));
  } else {
    cudnnDataType_t type;
    WEFT_ICHECK(cudnn_type(dtype, &type)) << "cuDNN RNN: no cuDNN type";
    TensorDesc t;
    flat_desc(t, type, n, device_of(ctx));
    // 1.0 in IEEE binary16 and in bfloat16.
    const uint16_t one = dtype == DType::kFloat16 ? 0x3C00 : 0x3F80;
    WEFT_CUDA_CALL(cudnnSetTensor(handles(ctx).cudnn, t.d, dst, &one), device_of(ctx));
  }
}

/// Byte offsets of the arrays one call carves from a single Scratch (a Scratch may hand out the
/// op's workspace, so two would overlap), each 256-byte aligned as cuDNN's spaces want.
class Layout {
 public:
  size_t take(size_t bytes) {
    const size_t at = (used_ + 255) / 256 * 256;
    used_ = at + bytes;
    return at;
  }
  size_t bytes() const { return used_ + 256; }  // room to align the base
  static char* align(void* base) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(base);
    return reinterpret_cast<char*>((p + 255) / 256 * 256);
  }

 private:
  size_t used_ = 0;
};

void upload_lengths(const OpContext& ctx, const std::vector<int32_t>& lens, void* dst) {
  // From pageable memory: returns once `lens` is staged, so it may go out of scope after.
  copy_from_host(ctx, dst, lens.data(), lens.size() * sizeof(int32_t));
}

bool any_empty_sequence(const std::vector<int32_t>& lens) {
  return std::any_of(lens.begin(), lens.end(), [](int32_t v) { return v == 0; });
}

bool writes_directly(OpReq r) { return r == OpReq::kWrite || r == OpReq::kInplace; }

}  // namespace

RnnPathCounts rnn_path_counts() {
  return {cudnn_runs.load(std::memory_order_relaxed),
          fallback_runs.load(std::memory_order_relaxed)};
}

void count_rnn_fallback() { fallback_runs.fetch_add(1, std::memory_order_relaxed); }

bool cudnn_rnn_forward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                       std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<RnnParam>();
  const detail::RnnInputs ix = detail::forward_inputs(p);
  const DType dtype = in[ix.data].dtype();
  cudnnDataType_t type;
  if (!cudnn_type(dtype, &type)) return false;
  const rnn::RnnDims d = rnn::dims_of(p, in[ix.data].shape_of());
  if (const char* why = unsupported(p, d, p.has_mask() && ctx.is_train))
    return decline(attrs, dtype, why);
  const std::vector<int32_t> lens = host_lengths(ctx, ix.lens >= 0 ? &in[ix.lens] : nullptr, d);
  if (any_empty_sequence(lens)) return decline(attrs, dtype, "sequences of length 0");

  RnnDescs s;
  build(s, attrs, ctx, d, dtype, lens, /*training=*/false);
  const size_t es = dtype_size(dtype);
  const int64_t y_count = d.T * d.N * d.D * d.H;
  const bool y_scratch = req[0] == OpReq::kNull;
  Layout layout;
  const size_t at_w = layout.take(s.weight_bytes), at_work = layout.take(s.work_bytes),
               at_reserve = layout.take(s.reserve_bytes),
               at_lens = layout.take(lens.size() * sizeof(int32_t)),
               at_y = layout.take(y_scratch ? static_cast<size_t>(y_count) * es : 0);
  Scratch scratch(ctx, layout.bytes());
  char* base = Layout::align(scratch.get());
  void* w = base + at_w;
  auto* dev_lens = reinterpret_cast<int32_t*>(base + at_lens);
  upload_lengths(ctx, lens, dev_lens);
  memset_on_stream(ctx, w, 0, s.weight_bytes);
  copy_blocks(ctx, weight_blocks(s, ctx, d, w, es), es, w, in[ix.params].raw(), true);

  const int nvis = detail::visible_outputs(p);
  void* y = y_scratch ? base + at_y : out[0].raw();
  void* hy = nvis > 1 && req[1] != OpReq::kNull ? out[1].raw() : nullptr;
  void* cy = nvis > 2 && req[2] != OpReq::kNull ? out[2].raw() : nullptr;
  const void* cx = ix.cell >= 0 ? in[ix.cell].raw() : nullptr;
  WEFT_CUDA_CALL(cudnnRNNForward(handles(ctx).cudnn, s.rnn.d, CUDNN_FWD_MODE_INFERENCE, dev_lens,
                                 s.x.d, in[ix.data].raw(), s.y.d, y, s.h.d, in[ix.state].raw(), hy,
                                 s.h.d, cx, cy, s.weight_bytes, w, s.work_bytes, base + at_work,
                                 s.reserve_bytes, s.reserve_bytes ? base + at_reserve : nullptr),
                 s.dev);
  if (!y_scratch) zero_padding(ctx, y, lens, d, d.D * d.H, es);
  // Outside training the hidden dropout mask is all ones (Note [RNN dropout mask]).
  if (p.has_mask()) fill_ones(ctx, dtype, out[nvis].raw(), out[nvis].size());
  cudnn_runs.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool cudnn_rnn_backward(const OpAttrs& attrs, const OpContext& ctx, std::span<const TensorView> in,
                        std::span<const OpReq> req, std::span<const TensorView> out) {
  const auto& p = attrs.params<RnnParam>();
  const detail::RnnBackwardInputs ix = detail::backward_inputs(p);
  const DType dtype = in[ix.fwd.data].dtype();
  cudnnDataType_t type;
  if (!cudnn_type(dtype, &type)) return false;
  const rnn::RnnDims d = rnn::dims_of(p, in[ix.fwd.data].shape_of());
  if (const char* why = unsupported(p, d, ix.mask >= 0)) return decline(attrs, dtype, why);
  const std::vector<int32_t> lens =
      host_lengths(ctx, ix.fwd.lens >= 0 ? &in[ix.fwd.lens] : nullptr, d);
  if (any_empty_sequence(lens)) return decline(attrs, dtype, "sequences of length 0");

  RnnDescs s;
  build(s, attrs, ctx, d, dtype, lens, /*training=*/true);
  const size_t es = dtype_size(dtype);
  const bool lstm = p.lstm();
  const int64_t y_count = d.T * d.N * d.D * d.H, x_count = d.T * d.N * d.I,
                state_count = d.L * d.D * d.N * d.H,
                param_count = rnn::param_size(d.mode, d.L, d.D, d.I, d.H);
  auto bytes_unless = [&](bool direct, int64_t n) {
    return direct ? size_t{0} : static_cast<size_t>(n) * es;
  };
  Layout layout;
  const size_t at_w = layout.take(s.weight_bytes), at_dw = layout.take(s.weight_bytes),
               at_work = layout.take(s.work_bytes), at_reserve = layout.take(s.reserve_bytes),
               at_lens = layout.take(lens.size() * sizeof(int32_t)),
               at_y = layout.take(static_cast<size_t>(y_count) * es),
               at_dx = layout.take(bytes_unless(writes_directly(req[0]), x_count)),
               at_dparams = layout.take(bytes_unless(req[1] != OpReq::kAdd, param_count)),
               at_dhx = layout.take(bytes_unless(writes_directly(req[2]), state_count)),
               at_dcx = layout.take(bytes_unless(!lstm || writes_directly(req[3]), state_count));
  Scratch scratch(ctx, layout.bytes());
  char* base = Layout::align(scratch.get());
  void* w = base + at_w;
  void* dw = base + at_dw;
  void* work = base + at_work;
  void* reserve = s.reserve_bytes ? base + at_reserve : nullptr;
  void* y = base + at_y;
  auto* dev_lens = reinterpret_cast<int32_t*>(base + at_lens);
  upload_lengths(ctx, lens, dev_lens);
  memset_on_stream(ctx, w, 0, s.weight_bytes);
  const std::vector<Block> blocks = weight_blocks(s, ctx, d, w, es);
  copy_blocks(ctx, blocks, es, w, in[ix.fwd.params].raw(), true);

  cudnnHandle_t handle = handles(ctx).cudnn;
  const void* x = in[ix.fwd.data].raw();
  const void* hx = in[ix.fwd.state].raw();
  const void* cx = lstm ? in[ix.fwd.cell].raw() : nullptr;
  // The forward pass again, keeping what the backward passes read in the reserve space.
  WEFT_CUDA_CALL(cudnnRNNForward(handle, s.rnn.d, CUDNN_FWD_MODE_TRAINING, dev_lens, s.x.d, x,
                                 s.y.d, y, s.h.d, hx, nullptr, s.h.d, cx, nullptr, s.weight_bytes,
                                 w, s.work_bytes, work, s.reserve_bytes, reserve),
                 s.dev);
  void* dx = writes_directly(req[0]) ? out[0].raw() : base + at_dx;
  void* dhx = writes_directly(req[2]) ? out[2].raw() : base + at_dhx;
  void* dcx = !lstm ? nullptr : writes_directly(req[3]) ? out[3].raw() : base + at_dcx;
  const void* dhy = ix.dhy >= 0 ? in[ix.dhy].raw() : nullptr;  // null: zero
  const void* dcy = ix.dcy >= 0 ? in[ix.dcy].raw() : nullptr;
  WEFT_CUDA_CALL(
      cudnnRNNBackwardData_v8(handle, s.rnn.d, dev_lens, s.y.d, y, in[ix.dy].raw(), s.x.d, dx,
                              s.h.d, hx, dhy, dhx, s.h.d, cx, dcy, dcx, s.weight_bytes, w,
                              s.work_bytes, work, s.reserve_bytes, reserve),
      s.dev);
  zero_padding(ctx, dx, lens, d, d.I, es);
  if (req[1] != OpReq::kNull) {
    // cuDNN adds into the gradient space (CUDNN_WGRAD_MODE_ADD is the mode cuDNN 8 documents).
    memset_on_stream(ctx, dw, 0, s.weight_bytes);
    WEFT_CUDA_CALL(cudnnRNNBackwardWeights_v8(handle, s.rnn.d, CUDNN_WGRAD_MODE_ADD, dev_lens,
                                              s.x.d, x, s.h.d, hx, s.y.d, y, s.weight_bytes, dw,
                                              s.work_bytes, work, s.reserve_bytes, reserve),
                   s.dev);
    // The blocks' offsets are relative to the space, so they serve the gradient space too.
    void* dparams = req[1] == OpReq::kAdd ? base + at_dparams : out[1].raw();
    copy_blocks(ctx, blocks, es, dw, dparams, false);
    if (req[1] == OpReq::kAdd) accumulate(ctx, dtype, dparams, out[1].raw(), param_count);
  }
  if (req[0] == OpReq::kAdd) accumulate(ctx, dtype, dx, out[0].raw(), x_count);
  if (req[2] == OpReq::kAdd) accumulate(ctx, dtype, dhx, out[2].raw(), state_count);
  if (lstm && req[3] == OpReq::kAdd) accumulate(ctx, dtype, dcx, out[3].raw(), state_count);
  cudnn_runs.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace weft::cuda
