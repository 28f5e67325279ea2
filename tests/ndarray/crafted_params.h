// Byte-level builders of `.params` files (layout in FORMATS.md) for tests that need records
// weft's writer never produces: sparse records with hostile logical shapes, inconsistent counts.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

namespace weft::testing {

/// Appends little-endian fields. A value type; not thread-safe.
class ParamsBytes {
 public:
  template <typename T>
  ParamsBytes& put(T value) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &value, sizeof(T));
    return *this;
  }
  /// i32 ndim, then ndim i64 dims.
  ParamsBytes& shape(std::initializer_list<int64_t> dims) {
    put<int32_t>(static_cast<int32_t>(dims.size()));
    for (int64_t d : dims) put<int64_t>(d);
    return *this;
  }
  /// The file header and the array count.
  ParamsBytes& header(uint64_t count) {
    return put<uint64_t>(0x112).put<uint64_t>(0).put<uint64_t>(count);
  }
  /// The names vector.
  ParamsBytes& names(std::initializer_list<std::string> list) {
    put<uint64_t>(list.size());
    for (const std::string& n : list) {
      put<uint64_t>(n.size());
      bytes.insert(bytes.end(), n.begin(), n.end());
    }
    return *this;
  }
  std::vector<uint8_t> bytes;
};

constexpr uint32_t kMagicV2 = 0xF993FAC9;
constexpr int32_t kFlagFloat32 = 0;
constexpr int32_t kFlagInt64 = 6;

/// A dict file with one V2 row_sparse float32 record called `name`: logical shape `shape`
/// (rows, width), one stored row of `width` values 1..width whose row index is `row_index`.
inline std::vector<uint8_t> row_sparse_params(const std::string& name, int64_t rows, int64_t width,
                                              int64_t row_index) {
  ParamsBytes b;
  b.header(1).put<uint32_t>(kMagicV2).put<int32_t>(1);  // row_sparse
  b.shape({1, width});                                  // storage shape: one stored row
  b.shape({rows, width});                               // logical shape
  b.put<int32_t>(1).put<int32_t>(0);                    // cpu(0)
  b.put<int32_t>(kFlagFloat32);
  b.put<int32_t>(kFlagInt64).shape({1});  // aux 0: the row indices
  for (int64_t i = 0; i < width; ++i) b.put<float>(static_cast<float>(i + 1));
  b.put<int64_t>(row_index);
  b.names({name});
  return b.bytes;
}

/// A dict file with one V2 row_sparse float32 record called `name` of logical shape (rows,
/// width) that stores no rows: all of it is zeros once densified. 116 bytes plus the name.
inline std::vector<uint8_t> empty_row_sparse_params(const std::string& name, int64_t rows,
                                                    int64_t width) {
  ParamsBytes b;
  b.header(1).put<uint32_t>(kMagicV2).put<int32_t>(1);  // row_sparse
  b.shape({0, width});                                  // storage shape: no stored rows
  b.shape({rows, width});                               // logical shape
  b.put<int32_t>(1).put<int32_t>(0);                    // cpu(0)
  b.put<int32_t>(kFlagFloat32);
  b.put<int32_t>(kFlagInt64).shape({0});  // aux 0: no row indices
  b.names({name});
  return b.bytes;
}

/// A dict file with one V2 csr float32 record called `name`: logical shape (1, cols), one
/// stored value 7 in column `column`.
inline std::vector<uint8_t> csr_params(const std::string& name, int64_t cols, int64_t column) {
  ParamsBytes b;
  b.header(1).put<uint32_t>(kMagicV2).put<int32_t>(2);  // csr
  b.shape({1});                                         // storage shape: nnz = 1
  b.shape({1, cols});                                   // logical shape
  b.put<int32_t>(1).put<int32_t>(0);                    // cpu(0)
  b.put<int32_t>(kFlagFloat32);
  b.put<int32_t>(kFlagInt64).shape({2});  // aux 0: indptr
  b.put<int32_t>(kFlagInt64).shape({1});  // aux 1: column indices
  b.put<float>(7.0f);
  b.put<int64_t>(0).put<int64_t>(1);  // indptr
  b.put<int64_t>(column);
  b.names({name});
  return b.bytes;
}

/// Writes `bytes` to `path` (overwriting).
inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

}  // namespace weft::testing
