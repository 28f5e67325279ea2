// Saving and loading NDArrays: MXNet `.params` files (lists and dicts, `arg:`/`aux:` names) and
// NumPy `.npy` files, on top of the host-level readers in ndarray/serialize.h.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ndarray/ndarray.h"

namespace weft {

/// Arrays read from a `.params` file, in file order. `names` is empty when a list was saved.
struct LoadedArrays {
  std::vector<std::string> names;
  std::vector<NDArray> arrays;
  /// The array called `name`; throws ValueError naming the file's keys when absent.
  const NDArray& get(const std::string& name) const;
  /// Whether `name` is present.
  bool contains(const std::string& name) const;
};

/// The default of LoadOptions::max_sparse_expansion_bytes: 256 MiB.
inline constexpr uint64_t kDefaultMaxSparseExpansionBytes = uint64_t{256} << 20;
/// Sparse records may always densify to this many times the bytes they store (values and
/// indices), whatever LoadOptions::max_sparse_expansion_bytes says.
inline constexpr uint64_t kSparseExpansionRatio = 1024;

/// How load_arrays reads a file. A value type.
struct LoadOptions {
  /// Where the arrays go (the CPU; copy_to() elsewhere afterwards).
  Device device = Device::cpu();
  /// Sparse records (csr, row_sparse) are densified, and an empty one costs a few dozen bytes of
  /// file whatever its shape. The dense bytes of all sparse records of one file may exceed
  /// kSparseExpansionRatio times the bytes they store only up to this many bytes; past both, the
  /// load is refused with a ValueError naming the array, before it is allocated (Note
  /// [Densifying hostile records]). Raise it to load a file of large, mostly empty sparse arrays.
  uint64_t max_sparse_expansion_bytes = kDefaultMaxSparseExpansionBytes;
};

/// Loads a `.params` file (every layout in FORMATS.md). Sparse arrays (csr, row_sparse) are
/// densified within `options.max_sparse_expansion_bytes`; "none" arrays load as none NDArrays.
/// Throws ValueError naming file, offset and problem on malformed input. Thread-safe.
LoadedArrays load_arrays(const std::string& path, const LoadOptions& options);
/// load_arrays with default options on `device`.
LoadedArrays load_arrays(const std::string& path, Device device = Device::cpu());
/// Like load_arrays for `size` bytes at `data` (not retained); `what` names the source in error
/// messages. A record whose shape is beyond weft's limits (Note [Checked sizes]) throws
/// ShapeError, and one larger than the device's memory OutOfMemory, naming the array (index and
/// name) and its shape, before anything is allocated for it. Thread-safe.
LoadedArrays load_arrays_from_memory(const void* data, size_t size, const std::string& what,
                                     const LoadOptions& options);
/// load_arrays_from_memory with default options on `device`.
LoadedArrays load_arrays_from_memory(const void* data, size_t size, const std::string& what,
                                     Device device = Device::cpu());
/// Saves a dict (waits for pending writes of each array first). V2 records unless `v3`.
void save_arrays(const std::string& path,
                 const std::vector<std::pair<std::string, NDArray>>& arrays, bool v3 = false);
/// Saves a list.
void save_arrays(const std::string& path, const std::vector<NDArray>& arrays, bool v3 = false);

/// Reads / writes one array as `.npy` (little-endian, C order).
NDArray load_npy_array(const std::string& path, Device device = Device::cpu());
/// Like load_npy_array for `size` bytes at `data` (not retained); `what` names the source.
NDArray load_npy_array_from_memory(const void* data, size_t size, const std::string& what,
                                   Device device = Device::cpu());
void save_npy_array(const std::string& path, const NDArray& array);

}  // namespace weft
