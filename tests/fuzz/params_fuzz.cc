// libFuzzer entry point for the .params parser: any input must load or throw weft::Error.
#include <cstddef>
#include <cstdint>

#include "base/error.h"
#include "ndarray/serialize.h"

/// Parses `data` as a .params file; a weft::Error is the expected outcome for bad input, and
/// anything else (a crash, another exception, a sanitizer report) is a finding.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const weft::NamedArrays arrays = weft::load_params_from_memory(data, size, "fuzz");
    // What loads must save and load back to the same arrays' bytes.
    bool v3 = false;
    for (const weft::HostArray& a : arrays.arrays) v3 = v3 || a.shape.ndim() == 0;
    try {
      const std::vector<uint8_t> saved = weft::save_params_to_memory(arrays, v3);
      const weft::NamedArrays again =
          weft::load_params_from_memory(saved.data(), saved.size(), "fuzz-resaved");
      if (again.arrays.size() != arrays.arrays.size() || again.names != arrays.names) {
        __builtin_trap();
      }
      for (size_t i = 0; i < arrays.arrays.size(); ++i) {
        if (again.arrays[i].bytes != arrays.arrays[i].bytes ||
            again.arrays[i].shape != arrays.arrays[i].shape) {
          __builtin_trap();
        }
      }
    } catch (const weft::ValueError&) {
      // Loaded files that cannot be saved as they are (a sparse V3 mix) are fine.
    }
  } catch (const weft::Error&) {
  }
  return 0;
}
