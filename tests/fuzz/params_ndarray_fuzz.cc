// libFuzzer entry point for the whole `.params` -> NDArray path: parsing, then densifying sparse
// records and allocating the arrays (load_arrays_from_memory). Any input must load or throw
// weft::Error; what loads must have the file's shapes, and dense arrays the file's bytes; sparse
// records that densify out of proportion to the file must be refused.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "devices/device_api.h"
#include "ndarray/io.h"
#include "ndarray/serialize.h"
#include "tests/fuzz/fuzz_runtime.h"

namespace {

// The sparse densify limit the target loads with (LoadOptions::max_sparse_expansion_bytes): low
// enough that a refused file is refused within the byte budget.
constexpr uint64_t kSparseLimit = weft::fuzz::kMaxAllocatedBytes / 4;

enum class Prediction { kLoads, kOverBudget, kRefused };

// What loading `raw` does before it stops. Arrays are converted in order, and one beyond
// weft's limits or the device's memory throws before allocating (which is the behaviour under
// test), so only the arrays before it count; sparse records that take the file's sparse records
// past kSparseLimit and kSparseExpansionRatio times the bytes they store are refused before
// allocating (Note [Densifying hostile records]), and the load must then fail.
Prediction predict(const weft::NamedArrays& raw) {
  const size_t capacity = weft::device_memory_capacity(weft::Device::cpu());
  size_t total = 0;
  uint64_t sparse_dense = 0, sparse_stored = 0;
  for (const weft::HostArray& a : raw.arrays) {
    if (!a.shape.known()) continue;  // none arrays allocate nothing
    if (!a.shape.within_limits()) return Prediction::kLoads;
    const size_t bytes = weft::shape_bytes(a.shape, weft::dtype_size(a.dtype), "fuzz");
    if (capacity != 0 && bytes > capacity) return Prediction::kLoads;
    if (a.storage_type != 0) {
      sparse_dense += bytes;
      sparse_stored += a.bytes.size();
      for (const auto& aux : a.aux_bytes) sparse_stored += aux.size();
      if (sparse_dense > kSparseLimit && sparse_dense / weft::kSparseExpansionRatio > sparse_stored)
        return Prediction::kRefused;
    }
    total += bytes;
    if (total > weft::fuzz::kMaxAllocatedBytes) return Prediction::kOverBudget;
  }
  return Prediction::kLoads;
}

weft::LoadedArrays load(const uint8_t* data, size_t size) {
  weft::LoadOptions options;
  options.max_sparse_expansion_bytes = kSparseLimit;
  return weft::load_arrays_from_memory(data, size, "fuzz", options);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::fuzz::use_sync_runtime();
  return 0;
}

/// A weft::Error is the expected outcome for bad input; anything else (a crash, another
/// exception, a sanitizer report, arrays that differ from the file) is a finding.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::NamedArrays raw;
  try {
    raw = weft::load_params_from_memory(data, size, "fuzz");
  } catch (const weft::Error&) {
    // The NDArray path must fail too, and just as cleanly.
    try {
      load(data, size);
      __builtin_trap();
    } catch (const weft::Error&) {
    }
    return 0;
  }
  const Prediction prediction = predict(raw);
  if (prediction == Prediction::kOverBudget) return 0;
  if (prediction == Prediction::kRefused) {
    try {
      load(data, size);
      __builtin_trap();  // a sparse expansion past both limits loaded
    } catch (const weft::Error&) {
    }
    return 0;
  }
  try {
    const weft::LoadedArrays loaded = load(data, size);
    if (loaded.arrays.size() != raw.arrays.size() || loaded.names != raw.names) __builtin_trap();
    for (size_t i = 0; i < raw.arrays.size(); ++i) {
      const weft::HostArray& h = raw.arrays[i];
      const weft::NDArray& a = loaded.arrays[i];
      if (!h.shape.rank_known()) {
        if (!a.is_none()) __builtin_trap();
        continue;
      }
      if (a.is_none() || a.shape() != h.shape || a.dtype() != h.dtype) __builtin_trap();
      if (h.storage_type != 0) continue;
      std::vector<uint8_t> bytes(a.nbytes());
      a.copy_to_host(bytes.data(), bytes.size());
      if (bytes != h.bytes) __builtin_trap();
    }
  } catch (const weft::Error&) {
  }
  return 0;
}
