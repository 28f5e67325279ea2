// Host-level reading and writing of MXNet `.params` files and NumPy `.npy` files (no NDArray).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/device.h"
#include "base/dtype.h"
#include "base/shape.h"

namespace weft {

/// Storage types of a `.params` record (MXNet's NDArrayStorageType).
enum class StorageType : int32_t {
  kDense = 0,      ///< dense, C-order
  kRowSparse = 1,  ///< row_sparse: values of the stored rows + one aux array (row indices)
  kCSR = 2,        ///< csr: values + two aux arrays (indptr, indices)
};

/// One array read from or written to a file, held in host memory. A value type that owns its
/// bytes; not thread-safe for concurrent mutation.
///
/// A "none" array (a `.params` record with ndim 0 in V2/V1/legacy records, or an unknown shape
/// in a V3 record) has `shape.ndim() == -1`, `dtype == DType::kUnknown` and no bytes.
struct HostArray {
  /// The logical shape. ndim -1 marks a "none" array.
  Shape shape;
  /// The element type (numbered like MXNet's type flags).
  DType dtype = DType::kUnknown;
  /// Raw little-endian C-order data (dense), or the stored values (sparse: `storage_shape`
  /// elements).
  std::vector<uint8_t> bytes;
  /// The context recorded in the file (informational; cpu_shared reads as cpu). Saving always
  /// records cpu(0).
  Device device;
  /// 0 dense, 1 row_sparse, 2 csr (see StorageType).
  int storage_type = 0;
  /// Sparse only: the shape of the stored values.
  Shape storage_shape;
  /// Sparse only: per auxiliary array (csr: indptr, indices; row_sparse: indices) its dtype and
  /// shape.
  std::vector<std::pair<DType, Shape>> aux_meta;
  /// Sparse only: per auxiliary array its raw little-endian data.
  std::vector<std::vector<uint8_t>> aux_bytes;
};

/// The contents of a `.params` file: a list (names empty) or a dict (one name per array).
struct NamedArrays {
  /// Empty when a list was saved; otherwise `names[i]` names `arrays[i]`.
  std::vector<std::string> names;
  /// The arrays, in file order.
  std::vector<HostArray> arrays;
};

/// Reads a whole `.params` file (V3, V2, V1 and legacy no-magic records; dense, row_sparse and
/// csr). Throws ValueError naming the file, the byte offset and what was wrong for a missing,
/// truncated or corrupt file; never aborts and never allocates more than the file's size
/// suggests. Thread-safe (no shared state).
NamedArrays load_params(const std::string& path);

/// Like load_params for `size` bytes at `data` (not retained); `what` names the source in
/// error messages. Thread-safe.
NamedArrays load_params_from_memory(const void* data, size_t size, const std::string& what);

/// Writes `arrays` to `path` as a `.params` file: dense V2 records (magic 0xF993FAC9), or V3
/// records (0xF993FACA, NumPy-shape semantics, dense only) when `v3` is true; context cpu(0).
/// Sparse arrays are written as V2 sparse records. A 0-d array needs `v3` (V2 reads ndim 0 as
/// "none"). Throws ValueError for an inconsistent array or name list (before touching the file)
/// or when the file cannot be written. Thread-safe for distinct paths.
void save_params(const std::string& path, const NamedArrays& arrays, bool v3 = false);

/// Like save_params, returning the file's bytes. Thread-safe.
std::vector<uint8_t> save_params_to_memory(const NamedArrays& arrays, bool v3 = false);

/// Reads a `.npy` file (format 1.0, 2.0 or 3.0) holding a little-endian (or byte-order-free)
/// C-order array of a dtype weft knows (f2/f4/f8, i1/i2/i4/i8, u1/u2/u4/u8, b1). Throws
/// ValueError naming the file and the problem for a big-endian array, a Fortran-order array of
/// two or more dimensions (0-d and 1-d data is the same in either order), an unknown or
/// structured descr, or a malformed/truncated file. Thread-safe.
HostArray load_npy(const std::string& path);

/// Like load_npy for `size` bytes at `data` (not retained); `what` names the source in error
/// messages. Thread-safe.
HostArray load_npy_from_memory(const void* data, size_t size, const std::string& what);

/// What a `.npy` header says: the element type, the shape and where the data starts.
struct NpyHeader {
  DType dtype = DType::kUnknown;
  Shape shape;
  size_t data_offset = 0;  ///< bytes from the start of the file to the first element
};

/// Parses and checks the header of the `.npy` file held in `size` bytes at `data` (the same
/// rules as load_npy) and that the data it announces fits in `size`, without reading the data
/// (for memory-mapped files). Errors are ValueErrors "`op`: '`what`' at byte offset N: ...".
/// Thread-safe.
NpyHeader parse_npy_header(const void* data, size_t size, const std::string& what,
                           const char* op = "load_npy");

/// Writes a dense array as a `.npy` file (format 1.0, or 2.0 when the header needs it),
/// little-endian, C order. Throws ValueError for a none/sparse/inconsistent array, a dtype
/// NumPy cannot name (bfloat16), or when the file cannot be written. Thread-safe for distinct
/// paths.
void save_npy(const std::string& path, const HostArray& array);

/// Like save_npy, returning the file's bytes. Thread-safe.
std::vector<uint8_t> save_npy_to_memory(const HostArray& array);

/// Splits "arg:name"/"aux:name" checkpoint keys: returns {"arg"|"aux"|"", name}. A key with
/// any other prefix (or none) returns {"", key}. Thread-safe.
std::pair<std::string, std::string> split_param_name(const std::string& key);

}  // namespace weft
