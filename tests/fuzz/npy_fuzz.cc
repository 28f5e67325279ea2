// libFuzzer entry point for `.npy` -> NDArray: the header parser, the byte count, the NDArray
// made from it, and a save/load round trip. Any input must load or throw weft::Error.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/error.h"
#include "ndarray/io.h"
#include "ndarray/serialize.h"
#include "tests/fuzz/fuzz_runtime.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::fuzz::use_sync_runtime();
  return 0;
}

/// A weft::Error is the expected outcome for bad input; anything else (a crash, another
/// exception, a sanitizer report, an array that differs from the file or its round trip) is a
/// finding.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::HostArray h;
  try {
    h = weft::load_npy_from_memory(data, size, "fuzz");
  } catch (const weft::Error&) {
    try {
      weft::load_npy_array_from_memory(data, size, "fuzz");
      __builtin_trap();  // the NDArray path accepted what the parser refused
    } catch (const weft::Error&) {
    }
    return 0;
  }
  // The data is in the input, so the array is small: making the NDArray must succeed.
  const weft::NDArray a = weft::load_npy_array_from_memory(data, size, "fuzz");
  if (a.shape() != h.shape || a.dtype() != h.dtype) __builtin_trap();
  std::vector<uint8_t> bytes(a.nbytes());
  a.copy_to_host(bytes.data(), bytes.size());
  if (bytes != h.bytes) __builtin_trap();
  // What loads saves and loads back the same.
  const std::vector<uint8_t> saved = weft::save_npy_to_memory(h);
  const weft::HostArray again =
      weft::load_npy_from_memory(saved.data(), saved.size(), "fuzz-resaved");
  if (again.shape != h.shape || again.dtype != h.dtype || again.bytes != h.bytes) __builtin_trap();
  return 0;
}
