// NDArray wrappers of the .params/.npy readers: densifying sparse records, waiting before saves.
#include "ndarray/io.h"

#include <cstdint>
#include <cstring>

#include "memory/allocator.h"
#include "ndarray/serialize.h"

namespace weft {
namespace {

// Note [Densifying hostile records]
// A sparse record's logical shape is only metadata in the file: nothing in it is backed by
// bytes, so a crafted (1, 2^62) csr or (2^59, 16) row_sparse record costs a few dozen bytes.
// Before anything is allocated, its size goes through shape_bytes (Note [Checked sizes]) and
// the device capacity, both naming the array; then every count is checked against the bytes
// actually read (indices, values) and every index against the shape, so that the scatter below
// only writes inside the dense array.
// Within the machine's memory a 121-byte file may still declare an empty 1 GiB record, and a
// file of many such records any multiple of it: the dense bytes of a file's sparse records
// together may pass kSparseExpansionRatio times the bytes they store only up to
// LoadOptions::max_sparse_expansion_bytes (SparseBudget), checked before each is allocated.

/// Index `i` of an auxiliary array of int32 or int64 indices; `bytes` holds at least i + 1.
int64_t read_index(const std::vector<uint8_t>& bytes, DType type, int64_t i) {
  if (type == DType::kInt64) {
    int64_t v;
    std::memcpy(&v, bytes.data() + i * 8, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, bytes.data() + i * 4, 4);
  return v;
}

/// Checks auxiliary array `i` of `a`: an int32/int64 vector whose bytes match its shape. Returns
/// its length.
int64_t check_index_array(const HostArray& a, size_t i, const char* role, const std::string& what) {
  const auto& [type, shape] = a.aux_meta[i];
  WEFT_CHECK(type == DType::kInt64 || type == DType::kInt32)
      << what << ": sparse " << role << " have dtype " << dtype_name(type)
      << " (expected int32 or int64)";
  WEFT_CHECK(shape.ndim() == 1) << what << ": sparse " << role << " have shape " << shape
                                << " (expected 1-d)";
  const size_t bytes = shape_bytes(shape, dtype_size(type), what + ": sparse " + role);
  WEFT_CHECK(a.aux_bytes[i].size() == bytes)
      << what << ": sparse " << role << " " << shape << " hold " << a.aux_bytes[i].size()
      << " bytes, expected " << bytes;
  return shape[0];
}

/// Scatters a row_sparse record (indices (k,), values (k, rest...)) into `dense`, zeroed, of
/// `a.shape`. See Note [Densifying hostile records].
void scatter_row_sparse(const HostArray& a, uint8_t* dense, const std::string& what) {
  WEFT_CHECK(a.aux_meta.size() == 1 && a.aux_bytes.size() == 1 && a.shape.ndim() >= 1)
      << what << ": malformed row_sparse array (shape " << a.shape << ", " << a.aux_meta.size()
      << " auxiliary arrays; expected rank >= 1 and 1)";
  const size_t elem = dtype_size(a.dtype);
  const int64_t k = check_index_array(a, 0, "row indices", what);
  const int64_t rows = a.shape[0];
  WEFT_CHECK(k <= rows) << what << ": row_sparse array has " << k << " row indices for " << rows
                        << " rows";
  // k <= rows, so k * row * elem is at most the dense size, which fits (shape_bytes).
  const size_t row_bytes = static_cast<size_t>(a.shape.prod(1, a.shape.ndim())) * elem;
  WEFT_CHECK(a.bytes.size() == static_cast<size_t>(k) * row_bytes)
      << what << ": row_sparse values hold " << a.bytes.size() << " bytes, expected " << k
      << " rows of " << row_bytes;
  for (int64_t r = 0; r < k; ++r) {
    const int64_t dst = read_index(a.aux_bytes[0], a.aux_meta[0].first, r);
    WEFT_CHECK(dst >= 0 && dst < rows) << what << ": row_sparse index " << dst << " (entry " << r
                                       << ") is out of range for " << rows << " rows";
    if (row_bytes > 0) {
      std::memcpy(dense + static_cast<size_t>(dst) * row_bytes,
                  a.bytes.data() + static_cast<size_t>(r) * row_bytes, row_bytes);
    }
  }
}

/// Scatters a csr record (indptr (rows + 1,), indices (nnz,), values (nnz,)) into `dense`,
/// zeroed, of `a.shape`. See Note [Densifying hostile records].
void scatter_csr(const HostArray& a, uint8_t* dense, const std::string& what) {
  WEFT_CHECK(a.aux_meta.size() == 2 && a.aux_bytes.size() == 2 && a.shape.ndim() == 2)
      << what << ": malformed csr array (shape " << a.shape << ", " << a.aux_meta.size()
      << " auxiliary arrays; expected 2-d and 2)";
  const size_t elem = dtype_size(a.dtype);
  const int64_t rows = a.shape[0], cols = a.shape[1];
  const int64_t indptr_len = check_index_array(a, 0, "indptr", what);
  WEFT_CHECK(indptr_len == rows + 1) << what << ": csr indptr has " << indptr_len << " entries for "
                                     << rows << " rows (expected rows + 1)";
  const int64_t nnz = check_index_array(a, 1, "column indices", what);
  WEFT_CHECK(a.bytes.size() == static_cast<size_t>(nnz) * elem)
      << what << ": csr values hold " << a.bytes.size() << " bytes, expected " << nnz
      << " values of " << elem;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t begin = read_index(a.aux_bytes[0], a.aux_meta[0].first, r);
    const int64_t end = read_index(a.aux_bytes[0], a.aux_meta[0].first, r + 1);
    WEFT_CHECK(0 <= begin && begin <= end && end <= nnz)
        << what << ": csr indptr [" << begin << ", " << end << ") of row " << r
        << " is not monotone within [0, " << nnz << "]";
    for (int64_t j = begin; j < end; ++j) {
      const int64_t c = read_index(a.aux_bytes[1], a.aux_meta[1].first, j);
      WEFT_CHECK(c >= 0 && c < cols) << what << ": csr column index " << c << " (entry " << j
                                     << ") is out of range for " << cols << " columns";
      std::memcpy(dense + static_cast<size_t>(r * cols + c) * elem,
                  a.bytes.data() + static_cast<size_t>(j) * elem, elem);
    }
  }
}

/// The dense bytes the sparse records of one file have taken so far, against what they store.
/// See Note [Densifying hostile records].
struct SparseBudget {
  uint64_t limit = kDefaultMaxSparseExpansionBytes;
  uint64_t dense = 0;
  uint64_t stored = 0;

  /// Adds a sparse record of `dense_bytes` storing `a`'s values and indices; ValueError naming
  /// the array and both limits when the file's sparse records pass them.
  void take(const HostArray& a, size_t dense_bytes, const std::string& what) {
    uint64_t held = a.bytes.size();
    for (const auto& aux : a.aux_bytes) held += aux.size();
    // Sizes are below 2^62 (shape_bytes, bytes read), so the sums cannot wrap.
    dense += dense_bytes;
    stored += held;
    const uint64_t proportionate =
        stored > UINT64_MAX / kSparseExpansionRatio ? UINT64_MAX : stored * kSparseExpansionRatio;
    WEFT_CHECK(dense <= limit || dense <= proportionate)
        << what << ": a " << (a.storage_type == 1 ? "row_sparse" : "csr") << " record of shape "
        << a.shape << " " << dtype_name(a.dtype) << " densifies to " << dense_bytes
        << " bytes from " << held << " stored; the file's sparse records would take " << dense
        << " dense bytes from " << stored
        << " stored, past LoadOptions::max_sparse_expansion_bytes " << limit << " and "
        << kSparseExpansionRatio
        << " times the bytes stored; raise max_sparse_expansion_bytes to load it";
  }
};

NDArray to_ndarray(const HostArray& a, Device device, const std::string& what,
                   SparseBudget* budget = nullptr) {
  if (!a.shape.rank_known()) return NDArray();
  WEFT_CHECK(device.type == DeviceType::kCPU)
      << what << ": arrays load to the CPU; copy_to() " << to_string(device) << " afterwards";
  WEFT_CHECK(a.storage_type >= 0 && a.storage_type <= 2)
      << what << ": unknown storage type " << a.storage_type
      << " (expected 0 dense, 1 row_sparse or 2 csr)";
  // Note [Checked sizes]: the shape is sized, and checked against the device, before anything
  // is allocated, with the array's name in the message.
  const size_t bytes = shape_bytes(a.shape, dtype_size(a.dtype), what);
  check_fits_device(bytes, device,
                    what + " (shape " + a.shape.to_string() + ", " + dtype_name(a.dtype) + ")");
  if (a.storage_type == 0) {
    WEFT_CHECK(a.bytes.size() == bytes)
        << what << ": shape " << a.shape << " " << dtype_name(a.dtype) << " needs " << bytes
        << " bytes, the record holds " << a.bytes.size();
    return NDArray::from_host(a.bytes.data(), a.shape, a.dtype, device);
  }
  if (budget != nullptr) budget->take(a, bytes, what);
  NDArray out = NDArray::empty(a.shape, a.dtype, device);
  // A fresh array has no pending operations: it can be written right here.
  auto* dense = static_cast<uint8_t*>(out.raw_data());
  if (bytes > 0) std::memset(dense, 0, bytes);
  if (a.storage_type == 1) {
    scatter_row_sparse(a, dense, what);
  } else {
    scatter_csr(a, dense, what);
  }
  return out;
}

HostArray to_host_array(const NDArray& a) {
  HostArray h;
  if (a.is_none()) return h;
  h.shape = a.shape();
  h.dtype = a.dtype();
  h.bytes.resize(a.nbytes());
  a.copy_to_host(h.bytes.data(), h.bytes.size());
  return h;
}

}  // namespace

const NDArray& LoadedArrays::get(const std::string& name) const {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return arrays[i];
  std::string keys;
  for (size_t i = 0; i < names.size() && i < 20; ++i) keys += (i ? ", " : "") + names[i];
  WEFT_THROW(ValueError) << "no array named '" << name << "' (keys: " << keys
                         << (names.size() > 20 ? ", ..." : "") << ")";
}

bool LoadedArrays::contains(const std::string& name) const {
  for (const auto& n : names)
    if (n == name) return true;
  return false;
}

namespace {
LoadedArrays to_loaded_arrays(const NamedArrays& raw, const LoadOptions& options,
                              const std::string& source) {
  LoadedArrays out;
  out.names = raw.names;
  SparseBudget budget;
  budget.limit = options.max_sparse_expansion_bytes;
  for (size_t i = 0; i < raw.arrays.size(); ++i) {
    std::string what = "'" + source + "' array " + std::to_string(i) +
                       (i < raw.names.size() ? " ('" + raw.names[i] + "')" : "");
    out.arrays.push_back(to_ndarray(raw.arrays[i], options.device, what, &budget));
  }
  return out;
}
}  // namespace

LoadedArrays load_arrays(const std::string& path, const LoadOptions& options) {
  return to_loaded_arrays(load_params(path), options, path);
}

LoadedArrays load_arrays(const std::string& path, Device device) {
  LoadOptions options;
  options.device = device;
  return load_arrays(path, options);
}

LoadedArrays load_arrays_from_memory(const void* data, size_t size, const std::string& what,
                                     const LoadOptions& options) {
  return to_loaded_arrays(load_params_from_memory(data, size, what), options, what);
}

LoadedArrays load_arrays_from_memory(const void* data, size_t size, const std::string& what,
                                     Device device) {
  LoadOptions options;
  options.device = device;
  return load_arrays_from_memory(data, size, what, options);
}

void save_arrays(const std::string& path,
                 const std::vector<std::pair<std::string, NDArray>>& arrays, bool v3) {
  NamedArrays raw;
  for (const auto& [name, a] : arrays) {
    raw.names.push_back(name);
    raw.arrays.push_back(to_host_array(a));
  }
  save_params(path, raw, v3);
}

void save_arrays(const std::string& path, const std::vector<NDArray>& arrays, bool v3) {
  NamedArrays raw;
  for (const auto& a : arrays) raw.arrays.push_back(to_host_array(a));
  save_params(path, raw, v3);
}

NDArray load_npy_array(const std::string& path, Device device) {
  return to_ndarray(load_npy(path), device, "'" + path + "'");
}

NDArray load_npy_array_from_memory(const void* data, size_t size, const std::string& what,
                                   Device device) {
  return to_ndarray(load_npy_from_memory(data, size, what), device, "'" + what + "'");
}

void save_npy_array(const std::string& path, const NDArray& array) {
  WEFT_CHECK(!array.is_none()) << "save_npy_array: the array is none";
  save_npy(path, to_host_array(array));
}

}  // namespace weft
