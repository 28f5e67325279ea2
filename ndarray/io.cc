// NDArray wrappers of the .params/.npy readers: densifying sparse records, waiting before saves.
#include "ndarray/io.h"

#include <cstring>

#include "ndarray/serialize.h"

namespace weft {
namespace {

int64_t read_index(const std::vector<uint8_t>& bytes, DType type, int64_t i) {
  switch (type) {
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, bytes.data() + i * 8, 8);
      return v;
    }
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, bytes.data() + i * 4, 4);
      return v;
    }
    default:
      WEFT_THROW(ValueError) << "sparse array: unsupported index dtype " << dtype_name(type);
  }
}

// Expands a csr or row_sparse record into dense bytes.
std::vector<uint8_t> densify(const HostArray& a, const std::string& what) {
  const size_t elem = dtype_size(a.dtype);
  const int64_t total = a.shape.size();
  std::vector<uint8_t> dense(static_cast<size_t>(total) * elem, 0);
  if (a.storage_type == 1) {  // row_sparse: indices (k,), values (k, rest...)
    WEFT_CHECK(a.aux_meta.size() == 1 && a.shape.ndim() >= 1) << what << ": malformed row_sparse array";
    const int64_t k = a.aux_meta[0].second.size();
    const int64_t row = a.shape.prod(1, a.shape.ndim());
    WEFT_CHECK(static_cast<int64_t>(a.bytes.size()) == k * row * static_cast<int64_t>(elem))
        << what << ": row_sparse values do not match " << k << " rows";
    for (int64_t r = 0; r < k; ++r) {
      const int64_t dst_row = read_index(a.aux_bytes[0], a.aux_meta[0].first, r);
      WEFT_CHECK(dst_row >= 0 && dst_row < a.shape[0]) << what << ": row_sparse index " << dst_row << " out of range";
      std::memcpy(dense.data() + dst_row * row * elem, a.bytes.data() + r * row * elem, row * elem);
    }
  } else if (a.storage_type == 2) {  // csr: indptr (rows+1,), indices (nnz,), values (nnz,)
    WEFT_CHECK(a.aux_meta.size() == 2 && a.shape.ndim() == 2) << what << ": malformed csr array";
    const int64_t rows = a.shape[0], cols = a.shape[1];
    WEFT_CHECK(a.aux_meta[0].second.size() == rows + 1) << what << ": csr indptr has the wrong length";
    const int64_t nnz = a.aux_meta[1].second.size();
    WEFT_CHECK(static_cast<int64_t>(a.bytes.size()) == nnz * static_cast<int64_t>(elem))
        << what << ": csr values do not match " << nnz << " indices";
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t begin = read_index(a.aux_bytes[0], a.aux_meta[0].first, r);
      const int64_t end = read_index(a.aux_bytes[0], a.aux_meta[0].first, r + 1);
      WEFT_CHECK(0 <= begin && begin <= end && end <= nnz) << what << ": csr indptr is not monotone within [0, nnz]";
      for (int64_t j = begin; j < end; ++j) {
        const int64_t c = read_index(a.aux_bytes[1], a.aux_meta[1].first, j);
        WEFT_CHECK(c >= 0 && c < cols) << what << ": csr column index " << c << " out of range";
        std::memcpy(dense.data() + (r * cols + c) * elem, a.bytes.data() + j * elem, elem);
      }
    }
  } else {
    WEFT_THROW(ValueError) << what << ": unknown storage type " << a.storage_type;
  }
  return dense;
}

NDArray to_ndarray(const HostArray& a, Device device, const std::string& what) {
  if (!a.shape.rank_known()) return NDArray();
  if (a.storage_type == 0) return NDArray::from_host(a.bytes.data(), a.shape, a.dtype, device);
  auto dense = densify(a, what);
  return NDArray::from_host(dense.data(), a.shape, a.dtype, device);
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
  WEFT_THROW(ValueError) << "no array named '" << name << "' (keys: " << keys << (names.size() > 20 ? ", ..." : "")
                         << ")";
}

bool LoadedArrays::contains(const std::string& name) const {
  for (const auto& n : names)
    if (n == name) return true;
  return false;
}

LoadedArrays load_arrays(const std::string& path, Device device) {
  NamedArrays raw = load_params(path);
  LoadedArrays out;
  out.names = raw.names;
  for (size_t i = 0; i < raw.arrays.size(); ++i) {
    std::string what = "'" + path + "' array " + std::to_string(i) + (i < raw.names.size() ? " ('" + raw.names[i] + "')" : "");
    out.arrays.push_back(to_ndarray(raw.arrays[i], device, what));
  }
  return out;
}

void save_arrays(const std::string& path, const std::vector<std::pair<std::string, NDArray>>& arrays, bool v3) {
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

void save_npy_array(const std::string& path, const NDArray& array) {
  WEFT_CHECK(!array.is_none()) << "save_npy_array: the array is none";
  save_npy(path, to_host_array(array));
}

}  // namespace weft
