// What flows through an input pipeline: elements (tuples of host arrays with their provenance),
// the errors that name an element, and the per-element random generator that keeps random
// transforms deterministic under any parallelism.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "ndarray/ndarray.h"

namespace weft::data {

/// One element of a dataset: a tuple of arrays (image, label, ...) and where it came from.
///
/// Arrays are on the CPU until a device prefetch moves them. Inside the pipeline an element is
/// owned by one stage at a time, and its arrays have no engine work pending (a transform writes
/// them directly); the consumer receives them as ordinary NDArrays. Not thread-safe: one owner.
struct Element {
  std::vector<NDArray> arrays;
  /// Position of the element in its source's order (0, 1, ...); -1 when not from one source
  /// (a batch names its first element).
  int64_t index = -1;
  /// Where it came from, for error messages: "train.rec record 17 (byte 40960)", "x.npy row 3".
  std::string origin;
};

/// An error raised by a pipeline stage for one element: the message names the element's index
/// and origin and the stage that failed ("map(decode_image) on element 17 of train.rec record 17
/// (byte 40960): ..."). Thrown to the consumer by Iterator::next().
class DataError : public ValueError {
 public:
  DataError(const std::string& message, int64_t index, std::string origin)
      : ValueError(message), index_(index), origin_(std::move(origin)) {}
  int64_t index() const { return index_; }
  const std::string& origin() const { return origin_; }

 private:
  int64_t index_;
  std::string origin_;
};

/// An interruption of the whole iteration, not the failure of one element (a KeyboardInterrupt
/// raised inside a Python function, say): stages pass it through unchanged — it is never
/// wrapped into a DataError nor skipped by ignore_errors(). The message starts with what
/// interrupted ("KeyboardInterrupt: ...").
class PipelineInterrupt : public Error {
 public:
  using Error::Error;
};

/// A small counter-based random generator (Philox-4x32-10): a stream is fully determined by
/// (seed, stream id), so element k of a map stage draws the same numbers whichever worker runs
/// it and in whatever order. Not thread-safe: one owner.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream);
  /// 32 uniformly distributed bits.
  uint32_t next_u32();
  /// Uniform in [0, 1).
  double uniform();
  /// 64 uniformly distributed bits (two draws, high word first).
  uint64_t next_u64() {
    const uint64_t hi = next_u32();
    return (hi << 32) | next_u32();
  }
  /// Uniform integer in [low, high] (inclusive); requires low <= high.
  int64_t uniform_int(int64_t low, int64_t high);
  /// True with probability p.
  bool bernoulli(double p) { return uniform() < p; }

 private:
  void refill();
  uint32_t key_[2];
  uint32_t counter_[4] = {0, 0, 0, 0};
  uint32_t block_[4] = {0, 0, 0, 0};
  int used_ = 4;
};

/// An NDArray on the CPU over memory the pipeline does not own (a file mapping, a decoder's
/// buffer, a Python object): `owner` is kept alive until the array's storage is freed (after any
/// engine work on it). `read_only` arrays refuse to be written by operators. Zero-copy.
/// Thread-safe.
NDArray wrap_host_memory(std::shared_ptr<const void> owner, void* data, const Shape& shape,
                         DType dtype, bool read_only);

/// The typed host pointer of a CPU array, for map functions: they run inside engine operations,
/// where waiting methods (to_vector, item, wait_to_read) are refused, and their input arrays
/// have no pending work. Checks device and dtype.
template <typename T>
T* host_data(const NDArray& a) {
  WEFT_CHECK(!a.is_none() && a.device().type == DeviceType::kCPU)
      << "host_data: the array is " << (a.is_none() ? "none" : "not on the CPU");
  WEFT_CHECK(a.dtype() == DTypeOf<T>::value) << "host_data: the array is " << dtype_name(a.dtype())
                                             << ", not " << dtype_name(DTypeOf<T>::value);
  return static_cast<T*>(a.raw_data());
}

/// Mixes seeds (splitmix64 finaliser): derives independent seeds for stages and epochs.
uint64_t mix_seed(uint64_t a, uint64_t b);

}  // namespace weft::data
