// What the coordinator knows of one collective: its description every rank must agree on (Meta),
// the arrays and completion of this rank's issue of it (Request), and the helpers that encode,
// compare and describe them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "devices/device_api.h"
#include "dist/dist.h"
#include "dist/wire.h"

namespace weft::dist::detail {

enum class Kind : uint8_t { kAllreduce, kBroadcast, kAllgather, kReduceScatter, kBarrier };
const char* kind_name(Kind kind);

/// What every rank must agree on for one collective.
struct Meta {
  std::string key;  ///< "<name>#<use>": the use-th collective of that name on this rank
  Kind kind = Kind::kAllreduce;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int32_t root = 0;
  int32_t priority = 0;
  bool gpu = false;            ///< GPU arrays: NCCL carries it (gpu_collectives.h)
  std::vector<int64_t> shape;  ///< the input's shape
};

/// One collective issued on this rank: the engine operation's arrays and its completion.
struct Request {
  Meta meta;
  void* in = nullptr;
  void* out = nullptr;
  size_t in_bytes = 0;
  size_t out_bytes = 0;
  /// GPU arrays: the stream of the engine operation (RunContext::stream), which the collective
  /// runs on; CPU arrays: a null handle.
  Stream stream;
  std::function<void(std::exception_ptr)> done;
};

/// The coordinator's encoding of a Meta (wire.h).
void put_meta(Writer& w, const Meta& m);
Meta get_meta(Reader& r);

/// "allreduce 'grad.w' (use 3)" for the key "grad.w#3": how messages name a collective.
std::string describe(const Meta& m);
/// "rank 2" or "ranks 0, 1".
std::string ranks_text(const std::vector<int>& ranks);
/// How two ranks' descriptions of one key differ ("rank 0 has shape [4], rank 1 has [5]"), or ""
/// when they agree.
std::string difference(const Meta& a, int rank_a, const Meta& b, int rank_b);
/// The bytes of a collective's input.
size_t payload_bytes(const Meta& m);

/// Divides `count` elements of `dtype` at `data` (host memory) by `size` in place: the mean of a
/// CPU allreduce after the transport summed (integer types truncate, as C++ division does).
void divide_by(void* data, size_t count, DType dtype, int size);
/// The operation the MPI transport runs: kMean sums (the coordinator divides afterwards).
inline ReduceOp transport_op(ReduceOp op) { return op == ReduceOp::kMean ? ReduceOp::kSum : op; }

}  // namespace weft::dist::detail
