// Bounds-checked readers and writers for MXNet `.params` and NumPy `.npy` files (layouts in
// FORMATS.md).
#include "ndarray/serialize.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <type_traits>

#include "base/error.h"

namespace weft {
namespace {

static_assert(
    std::endian::native == std::endian::little,
    "serialize.cc copies little-endian file data directly; add byte swapping for this host");

constexpr uint64_t kListMagic = 0x112;
constexpr uint32_t kMagicV1 = 0xF993FAC8;
constexpr uint32_t kMagicV2 = 0xF993FAC9;
constexpr uint32_t kMagicV3 = 0xF993FACA;
constexpr int kMaxTypeFlag = 12;

/// Concatenates its arguments with operator<<.
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

std::string hex(uint64_t value) {
  std::ostringstream os;
  os << "0x" << std::hex << std::uppercase << value;
  return os.str();
}

/// Number of auxiliary arrays of a storage type (0 dense, 1 row_sparse, 2 csr).
int num_aux(int storage_type) { return storage_type == 1 ? 1 : storage_type == 2 ? 2 : 0; }

bool valid_flag(int64_t flag) { return flag >= 0 && flag <= kMaxTypeFlag; }

// ---- reading ----------------------------------------------------------------------------------

/// A cursor over an in-memory file that checks every read against the end and throws ValueError
/// naming the operation, the source, the byte offset and the problem.
class ByteReader {
 public:
  ByteReader(const void* data, size_t size, std::string what, const char* op)
      : data_(static_cast<const uint8_t*>(data)), size_(size), what_(std::move(what)), op_(op) {
    if (data_ == nullptr && size_ != 0) fail(0, "null data pointer with a non-zero size");
  }

  size_t offset() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* cursor() const { return data_ + pos_; }

  /// Throws unless `n` more bytes are available for `field`.
  void need(uint64_t n, const std::string& field) const {
    if (n > remaining()) {
      fail(pos_,
           cat("truncated: ", field, " needs ", n, " bytes but only ", remaining(), " remain"));
    }
  }

  template <typename T>
  T read(const std::string& field) {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T), field);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::vector<uint8_t> read_bytes(uint64_t n, const std::string& field) {
    need(n, field);
    std::vector<uint8_t> out(data_ + pos_, data_ + pos_ + n);
    pos_ += n;
    return out;
  }

  void skip(uint64_t n, const std::string& field) {
    need(n, field);
    pos_ += n;
  }

  [[noreturn]] void fail(size_t at, const std::string& message) const {
    WEFT_THROW(ValueError) << op_ << ": '" << what_ << "' at byte offset " << at << ": " << message;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string what_;
  const char* op_;
};

/// Reads an i32 ndim and ndim i64 dims. With `allow_unknown`, ndim -1 gives an unknown Shape.
Shape read_shape(ByteReader& r, const std::string& field, bool allow_unknown) {
  const size_t at = r.offset();
  const int32_t ndim = r.read<int32_t>(field + " ndim");
  if (ndim == -1 && allow_unknown) return Shape();
  if (ndim < 0) {
    r.fail(at, cat(field, " has ndim ", ndim, " (expected >= 0",
                   allow_unknown ? " or -1 for unknown)" : ")"));
  }
  r.need(static_cast<uint64_t>(ndim) * sizeof(int64_t), cat(field, " with ", ndim, " dims"));
  Shape shape = Shape::filled(ndim, 0);
  for (int i = 0; i < ndim; ++i) {
    const size_t dim_at = r.offset();
    const int64_t d = r.read<int64_t>(field + " dim");
    if (d < 0) r.fail(dim_at, cat(field, " dim ", i, " is ", d, " (negative)"));
    shape[i] = d;
  }
  return shape;
}

/// Reads a legacy shape: `ndim` (already read) u32 dims.
Shape read_legacy_shape(ByteReader& r, uint32_t ndim, const std::string& field) {
  r.need(static_cast<uint64_t>(ndim) * sizeof(uint32_t),
         cat(field, " (no known magic, so read as a legacy record whose first u32 is ndim = ", ndim,
             ")"));
  if (ndim > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
    r.fail(r.offset(), cat(field, ": implausible legacy ndim ", ndim));
  }
  Shape shape = Shape::filled(static_cast<int>(ndim), 0);
  for (uint32_t i = 0; i < ndim; ++i) shape[static_cast<int>(i)] = r.read<uint32_t>(field + " dim");
  return shape;
}

Device read_context(ByteReader& r, const std::string& field) {
  const size_t at = r.offset();
  const int32_t type = r.read<int32_t>(field + " device type");
  const int32_t id = r.read<int32_t>(field + " device id");
  if (id < 0) r.fail(at + 4, cat(field, " device id is ", id, " (negative)"));
  switch (type) {
    case 1:
      return {DeviceType::kCPU, id};  // cpu
    case 2:
      return {DeviceType::kCUDA, id};  // gpu
    case 3:
      return {DeviceType::kCUDAHost, id};  // cpu_pinned
    case 5:
      return {DeviceType::kCPU, id};  // cpu_shared
    default:
      break;
  }
  r.fail(at, cat(field, " device type is ", type,
                 " (expected 1 cpu, 2 gpu, 3 cpu_pinned or 5 cpu_shared)"));
}

DType read_type_flag(ByteReader& r, const std::string& field) {
  const size_t at = r.offset();
  const int32_t flag = r.read<int32_t>(field);
  if (!valid_flag(flag)) {
    r.fail(at, cat(field, " is ", flag, " (expected an MXNet type flag 0..", kMaxTypeFlag, ")"));
  }
  return static_cast<DType>(flag);
}

/// Bytes of `shape`'s elements of `dtype` (Note [Checked sizes] in base/shape.h); a shape beyond
/// weft's limits fails through `r` (ValueError naming the source and offset).
uint64_t data_bytes(const ByteReader& r, size_t at, const Shape& shape, DType dtype,
                    const std::string& field) {
  if (!shape.within_limits()) {
    r.fail(
        at,
        cat(field, ": shape ", shape.to_string(),
            " overflows weft's size limit (its dimensions multiply to more than 2^56 elements)"));
  }
  return shape_bytes(shape, dtype_size(dtype), field);
}

/// Reads `shape`'s elements of `dtype`, checking the byte count for overflow and truncation.
std::vector<uint8_t> read_data(ByteReader& r, const Shape& shape, DType dtype,
                               const std::string& field) {
  const uint64_t n = data_bytes(r, r.offset(), shape, dtype, field);
  return r.read_bytes(n, cat(field, " (", shape.to_string(), " ", dtype_name(dtype), ")"));
}

// Note [none arrays]
// MXNet writes an empty NDArray as a record that ends right after its shape: ndim 0 in V2
// (legacy shape semantics, where ndim 0 means "no shape"), ndim -1 (unknown) in V3. A V3 ndim
// of 0 is a real 0-d scalar. weft reads both as a HostArray with ndim -1, dtype kUnknown and no
// bytes, and writes such a HostArray back the same way (always as a dense record).

/// Reads one array record (V3, V2, V1 or legacy); see Note [none arrays].
HostArray read_record(ByteReader& r, size_t index) {
  const std::string name = cat("array ", index);
  const size_t start = r.offset();
  const uint32_t magic = r.read<uint32_t>(name + " magic");
  HostArray a;
  if (magic == kMagicV2 || magic == kMagicV3) {
    const bool v3 = magic == kMagicV3;
    const std::string rec = cat(name, " (", v3 ? "V3" : "V2", " record at byte ", start, ")");
    const size_t stype_at = r.offset();
    const int32_t stype = r.read<int32_t>(rec + " storage type");
    if (stype < 0 || stype > 2) {
      r.fail(stype_at,
             cat(rec, " storage type is ", stype, " (expected 0 dense, 1 row_sparse or 2 csr)"));
    }
    if (v3 && stype != 0) {
      r.fail(stype_at, cat(rec, " storage type is ", stype, " but V3 records are dense only"));
    }
    const int nad = num_aux(stype);
    a.storage_type = stype;
    if (nad > 0) a.storage_shape = read_shape(r, rec + " storage shape", false);
    a.shape = read_shape(r, rec + " shape", v3);
    if (a.shape.ndim() == -1 || (!v3 && a.shape.ndim() == 0)) return HostArray{};
    a.device = read_context(r, rec);
    a.dtype = read_type_flag(r, rec + " type flag");
    for (int i = 0; i < nad; ++i) {
      const std::string aux = cat(rec, " aux ", i);
      const DType type = read_type_flag(r, aux + " type flag");
      a.aux_meta.emplace_back(type, read_shape(r, aux + " shape", false));
    }
    a.bytes = read_data(r, nad > 0 ? a.storage_shape : a.shape, a.dtype, rec + " data");
    for (int i = 0; i < nad; ++i) {
      a.aux_bytes.push_back(
          read_data(r, a.aux_meta[i].second, a.aux_meta[i].first, cat(rec, " aux ", i, " data")));
    }
    return a;
  }
  std::string rec;
  if (magic == kMagicV1) {
    rec = cat(name, " (V1 record at byte ", start, ")");
    a.shape = read_shape(r, rec + " shape", false);
  } else {
    rec = cat(name, " (legacy record at byte ", start, ")");
    a.shape = read_legacy_shape(r, magic, rec + " shape");
  }
  if (a.shape.ndim() == 0) return HostArray{};
  a.device = read_context(r, rec);
  a.dtype = read_type_flag(r, rec + " type flag");
  a.bytes = read_data(r, a.shape, a.dtype, rec + " data");
  return a;
}

/// Reads a whole file with std::ifstream; throws ValueError naming `op` and the path.
std::vector<uint8_t> read_file(const std::string& path, const char* op) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    WEFT_THROW(ValueError) << op << ": cannot open '" << path << "': no such file";
  }
  if (std::filesystem::is_directory(status)) {
    WEFT_THROW(ValueError) << op << ": cannot read '" << path << "': it is a directory";
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    WEFT_THROW(ValueError) << op << ": cannot open '" << path << "': " << std::strerror(errno);
  }
  std::vector<uint8_t> bytes;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof(chunk)) || in.gcount() > 0) {
    bytes.insert(bytes.end(), chunk, chunk + in.gcount());
  }
  if (in.bad()) WEFT_THROW(ValueError) << op << ": error reading '" << path << "'";
  return bytes;
}

/// Writes `bytes` to `path`; throws ValueError naming `op` and the path.
void write_file(const std::string& path, const std::vector<uint8_t>& bytes, const char* op) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    WEFT_THROW(ValueError) << op << ": cannot open '" << path
                           << "' for writing: " << std::strerror(errno);
  }
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) WEFT_THROW(ValueError) << op << ": error writing '" << path << "'";
}

// ---- writing ----------------------------------------------------------------------------------

/// Appends little-endian values to a byte buffer.
class ByteWriter {
 public:
  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_bytes(const uint8_t* data, size_t n) { bytes_.insert(bytes_.end(), data, data + n); }
  void put_bytes(const std::vector<uint8_t>& data) { put_bytes(data.data(), data.size()); }
  void put_shape(const Shape& shape) {
    put<int32_t>(shape.ndim());
    for (int64_t d : shape) put<int64_t>(d);
  }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

/// Checks that `bytes` holds exactly `shape`'s elements of `dtype`.
void check_payload(const std::string& what, const Shape& shape, DType dtype, size_t bytes) {
  WEFT_CHECK(shape.known()) << what << ": shape " << shape.to_string() << " is not fully known";
  WEFT_CHECK(valid_flag(static_cast<int>(dtype)))
      << what << ": dtype " << dtype_name(dtype) << " (" << static_cast<int>(dtype)
      << ") has no MXNet type flag";
  WEFT_CHECK(shape.within_limits())
      << what << ": shape " << shape.to_string()
      << " overflows weft's size limit (its dimensions multiply to more than 2^56 elements)";
  const uint64_t expected = shape_bytes(shape, dtype_size(dtype), what);
  WEFT_CHECK(expected == bytes) << what << ": shape " << shape.to_string() << " of "
                                << dtype_name(dtype) << " needs " << expected
                                << " bytes but the array holds " << bytes;
}

void write_record(ByteWriter& w, const HostArray& a, size_t index, bool v3) {
  const std::string what = cat("save_params: array ", index);
  const int stype = a.storage_type;
  WEFT_CHECK(stype >= 0 && stype <= 2)
      << what << ": storage type " << stype << " (expected 0 dense, 1 row_sparse or 2 csr)";
  WEFT_CHECK(!(v3 && stype != 0) || a.shape.ndim() == -1)
      << what << ": V3 records are dense only (storage type " << stype << "); save with v3=false";
  w.put<uint32_t>(v3 ? kMagicV3 : kMagicV2);
  if (a.shape.ndim() == -1) {  // Note [none arrays]
    WEFT_CHECK(a.bytes.empty()) << what << ": a none array (unknown shape) holds " << a.bytes.size()
                                << " bytes";
    w.put<int32_t>(0);
    w.put<int32_t>(v3 ? -1 : 0);
    return;
  }
  const int nad = num_aux(stype);
  w.put<int32_t>(stype);
  WEFT_CHECK(v3 || a.shape.ndim() > 0)
      << what
      << ": a 0-d array cannot be saved in a V2 record (ndim 0 reads back as none); "
         "save with v3=true";
  WEFT_CHECK(a.shape.known()) << what << ": shape " << a.shape.to_string() << " is not fully known";
  if (nad == 0) {
    check_payload(what, a.shape, a.dtype, a.bytes.size());
  } else {
    check_payload(what + " values", a.storage_shape, a.dtype, a.bytes.size());
    WEFT_CHECK(a.aux_meta.size() == static_cast<size_t>(nad) &&
               a.aux_bytes.size() == static_cast<size_t>(nad))
        << what << ": storage type " << stype << " needs " << nad << " aux arrays, got "
        << a.aux_meta.size() << " aux shapes and " << a.aux_bytes.size() << " aux buffers";
    for (int i = 0; i < nad; ++i) {
      check_payload(cat(what, " aux ", i), a.aux_meta[i].second, a.aux_meta[i].first,
                    a.aux_bytes[i].size());
    }
    w.put_shape(a.storage_shape);
  }
  w.put_shape(a.shape);
  w.put<int32_t>(1);  // context cpu(0)
  w.put<int32_t>(0);
  w.put<int32_t>(static_cast<int32_t>(a.dtype));
  for (int i = 0; i < nad; ++i) {
    w.put<int32_t>(static_cast<int32_t>(a.aux_meta[i].first));
    w.put_shape(a.aux_meta[i].second);
  }
  w.put_bytes(a.bytes);
  for (int i = 0; i < nad; ++i) w.put_bytes(a.aux_bytes[i]);
}

// ---- .npy ---------------------------------------------------------------------------------------

struct NpyType {
  const char* code;  // kind + size, as in a descr without its byte-order character
  DType dtype;
};
constexpr NpyType kNpyTypes[] = {
    {"f4", DType::kFloat32}, {"f8", DType::kFloat64}, {"f2", DType::kFloat16},
    {"u1", DType::kUInt8},   {"i1", DType::kInt8},    {"i2", DType::kInt16},
    {"u2", DType::kUInt16},  {"i4", DType::kInt32},   {"u4", DType::kUInt32},
    {"i8", DType::kInt64},   {"u8", DType::kUInt64},  {"b1", DType::kBool},
};
constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicSize = 6;

/// Recursive-descent parser for the Python-literal dict in a `.npy` header.
class NpyHeaderParser {
 public:
  NpyHeaderParser(const ByteReader& r, std::string text, size_t base)
      : r_(r), text_(std::move(text)), base_(base) {}

  void parse(std::string* descr, bool* fortran_order, Shape* shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const size_t key_at = pos_;
      const std::string key = parse_string("a key");
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() == '[') {
          fail(pos_, "structured (record) dtypes are not supported; descr must be a string");
        }
        *descr = parse_string("the descr value");
        have_descr = true;
      } else if (key == "fortran_order") {
        *fortran_order = parse_bool();
        have_order = true;
      } else if (key == "shape") {
        *shape = parse_tuple();
        have_shape = true;
      } else {
        fail(key_at, cat("unexpected key '", key, "' (expected descr, fortran_order, shape)"));
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_space();
      if (peek() != '}') fail(pos_, "expected ',' or '}' in the header dict");
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != text_.size()) fail(pos_, "unexpected text after the header dict");
    if (!have_descr || !have_order || !have_shape) {
      fail(0, "the header dict must have the keys descr, fortran_order and shape");
    }
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& message) const {
    r_.fail(base_ + at, "npy header: " + message);
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  void expect(char c) {
    if (peek() != c) fail(pos_, cat("expected '", c, "'"));
    ++pos_;
  }
  std::string parse_string(const char* what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail(pos_, cat("expected a quoted string for ", what));
    const size_t start = ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') fail(pos_, "escapes in strings are not supported");
      ++pos_;
    }
    if (pos_ >= text_.size()) fail(start - 1, cat("unterminated string for ", what));
    return text_.substr(start, pos_++ - start);
  }
  bool parse_bool() {
    if (text_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (text_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    fail(pos_, "fortran_order must be True or False");
  }
  int64_t parse_int() {
    const size_t start = pos_;
    if (!(peek() >= '0' && peek() <= '9')) fail(pos_, "expected a non-negative integer in shape");
    int64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (__builtin_mul_overflow(value, int64_t{10}, &value) ||
          __builtin_add_overflow(value, int64_t{peek() - '0'}, &value)) {
        fail(start, "shape dimension overflows int64");
      }
      ++pos_;
    }
    if (peek() == 'L') ++pos_;  // Python 2 long suffix
    return value;
  }
  Shape parse_tuple() {
    expect('(');
    std::vector<int64_t> dims;
    skip_space();
    while (peek() != ')') {
      dims.push_back(parse_int());
      if (dims.size() > 64) fail(pos_, "shape has more than 64 dimensions");
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
      } else if (peek() != ')') {
        fail(pos_, "expected ',' or ')' in shape");
      }
    }
    ++pos_;
    return Shape(dims);
  }

  const ByteReader& r_;
  std::string text_;
  size_t base_;
  size_t pos_ = 0;
};

/// The DType for a descr such as '<f4'; throws via `r` for big-endian or unknown descrs.
DType npy_dtype(const ByteReader& r, size_t at, const std::string& descr) {
  const char order = descr.empty() ? '\0' : descr[0];
  const std::string code = descr.size() > 1 ? descr.substr(1) : std::string();
  for (const NpyType& t : kNpyTypes) {
    if (code != t.code) continue;
    const bool single_byte = dtype_size(t.dtype) == 1;
    if (order == '<' || order == '=' || (single_byte && (order == '|' || order == '>'))) {
      return t.dtype;
    }
    if (order == '>') {
      r.fail(at, cat("descr '", descr,
                     "' is big-endian; weft reads little-endian arrays only "
                     "(convert with arr.astype(arr.dtype.newbyteorder('<')))"));
    }
    break;
  }
  r.fail(at, cat("unsupported descr '", descr,
                 "' (supported: little-endian <f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1)"));
}

/// The descr NumPy writes for `dtype` ('<f4', '|u1', ...), or "" when NumPy has none.
std::string npy_descr(DType dtype) {
  for (const NpyType& t : kNpyTypes) {
    if (t.dtype == dtype) return (dtype_size(dtype) == 1 ? "|" : "<") + std::string(t.code);
  }
  return "";
}

}  // namespace

// ---- public API ---------------------------------------------------------------------------------

NamedArrays load_params_from_memory(const void* data, size_t size, const std::string& what) {
  ByteReader r(data, size, what, "load_params");
  const uint64_t header = r.read<uint64_t>("file header");
  if (header != kListMagic) {
    r.fail(0, cat("not an MXNet .params file: header is ", hex(header), ", expected 0x112"));
  }
  r.read<uint64_t>("reserved header field");
  const size_t count_at = r.offset();
  const uint64_t count = r.read<uint64_t>("array count");
  // Every record takes at least 4 bytes (a legacy ndim-0 record), so a larger count is corrupt.
  if (count > r.remaining() / 4) {
    r.fail(count_at, cat("truncated or corrupt: array count ", count,
                         " needs at least 4 bytes per "
                         "array but only ",
                         r.remaining(), " bytes remain"));
  }
  NamedArrays out;
  out.arrays.reserve(std::min<uint64_t>(count, 1024));  // count is bounded by the size only
  for (uint64_t i = 0; i < count; ++i) out.arrays.push_back(read_record(r, i));
  const size_t names_at = r.offset();
  const uint64_t name_count = r.read<uint64_t>("name count");
  if (name_count > r.remaining() / 8) {
    r.fail(names_at, cat("truncated or corrupt: name count ", name_count,
                         " needs at least 8 bytes "
                         "per name but only ",
                         r.remaining(), " bytes remain"));
  }
  if (name_count != 0 && name_count != count) {
    r.fail(names_at, cat(name_count, " names for ", count,
                         " arrays (a dict has one name per array, a list none)"));
  }
  out.names.reserve(name_count);
  for (uint64_t i = 0; i < name_count; ++i) {
    const std::string field = cat("name ", i);
    const uint64_t length = r.read<uint64_t>(field + " length");
    r.need(length, field);
    out.names.emplace_back(reinterpret_cast<const char*>(r.cursor()), length);
    r.skip(length, field);
  }
  return out;
}

NamedArrays load_params(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file(path, "load_params");
  return load_params_from_memory(bytes.data(), bytes.size(), path);
}

std::vector<uint8_t> save_params_to_memory(const NamedArrays& arrays, bool v3) {
  WEFT_CHECK(arrays.names.empty() || arrays.names.size() == arrays.arrays.size())
      << "save_params: " << arrays.names.size() << " names for " << arrays.arrays.size()
      << " arrays (a dict needs one name per array, a list none)";
  ByteWriter w;
  w.put<uint64_t>(kListMagic);
  w.put<uint64_t>(0);
  w.put<uint64_t>(arrays.arrays.size());
  for (size_t i = 0; i < arrays.arrays.size(); ++i) write_record(w, arrays.arrays[i], i, v3);
  w.put<uint64_t>(arrays.names.size());
  for (const std::string& name : arrays.names) {
    w.put<uint64_t>(name.size());
    w.put_bytes(reinterpret_cast<const uint8_t*>(name.data()), name.size());
  }
  return w.take();
}

void save_params(const std::string& path, const NamedArrays& arrays, bool v3) {
  // Serialize first so that an invalid array leaves an existing file untouched.
  write_file(path, save_params_to_memory(arrays, v3), "save_params");
}

NpyHeader parse_npy_header(const void* data, size_t size, const std::string& what, const char* op) {
  ByteReader r(data, size, what, op);
  r.need(kNpyMagicSize, "the .npy magic");
  if (std::memcmp(r.cursor(), kNpyMagic, kNpyMagicSize) != 0) {
    r.fail(0, "not a .npy file (the magic \\x93NUMPY is missing)");
  }
  r.skip(kNpyMagicSize, "the .npy magic");
  const size_t version_at = r.offset();
  const uint8_t major = r.read<uint8_t>("major version");
  const uint8_t minor = r.read<uint8_t>("minor version");
  if (major < 1 || major > 3 || minor != 0) {
    r.fail(version_at, cat("unsupported .npy format version ", int(major), ".", int(minor),
                           " (1.0, 2.0 and 3.0 are supported)"));
  }
  const uint64_t header_length =
      major == 1 ? r.read<uint16_t>("header length") : r.read<uint32_t>("header length");
  const size_t header_at = r.offset();
  r.need(header_length, "header");
  std::string text(reinterpret_cast<const char*>(r.cursor()), header_length);
  r.skip(header_length, "header");

  std::string descr;
  bool fortran_order = false;
  NpyHeader h;
  NpyHeaderParser(r, std::move(text), header_at).parse(&descr, &fortran_order, &h.shape);
  h.dtype = npy_dtype(r, header_at, descr);
  if (fortran_order && h.shape.ndim() > 1) {
    r.fail(header_at,
           "fortran_order is True; weft reads C-order arrays only "
           "(save np.ascontiguousarray(arr))");
  }
  const uint64_t n = data_bytes(r, header_at, h.shape, h.dtype, "the header");
  r.need(n, cat("data (", h.shape.to_string(), " ", descr, ")"));
  h.data_offset = r.offset();
  return h;
}

HostArray load_npy_from_memory(const void* data, size_t size, const std::string& what) {
  const NpyHeader h = parse_npy_header(data, size, what);
  const size_t n = static_cast<size_t>(h.shape.size()) * dtype_size(h.dtype);
  HostArray a;
  a.shape = h.shape;
  a.dtype = h.dtype;
  const auto* begin = static_cast<const uint8_t*>(data) + h.data_offset;
  a.bytes.assign(begin, begin + n);
  a.device = Device::cpu();
  return a;
}

HostArray load_npy(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file(path, "load_npy");
  return load_npy_from_memory(bytes.data(), bytes.size(), path);
}

std::vector<uint8_t> save_npy_to_memory(const HostArray& a) {
  WEFT_CHECK(a.storage_type == 0) << "save_npy: only dense arrays can be saved (storage type "
                                  << a.storage_type << ")";
  WEFT_CHECK(a.shape.ndim() >= 0) << "save_npy: a none array (unknown shape) cannot be saved";
  const std::string descr = npy_descr(a.dtype);
  WEFT_CHECK(!descr.empty()) << "save_npy: dtype " << dtype_name(a.dtype)
                             << " has no NumPy equivalent";
  check_payload("save_npy", a.shape, a.dtype, a.bytes.size());

  std::string shape = "(";
  for (int i = 0; i < a.shape.ndim(); ++i) {
    if (i > 0) shape += ", ";
    shape += std::to_string(a.shape[i]);
  }
  if (a.shape.ndim() == 1) shape += ",";
  shape += ")";
  std::string header =
      cat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // NumPy pads the header with spaces and a newline so the data starts at a multiple of 64.
  size_t prefix = kNpyMagicSize + 2 + 2;
  int major = 1;
  if (header.size() + 1 + 64 > std::numeric_limits<uint16_t>::max()) {
    prefix = kNpyMagicSize + 2 + 4;
    major = 2;
  }
  const size_t unpadded = prefix + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');

  ByteWriter w;
  w.put_bytes(reinterpret_cast<const uint8_t*>(kNpyMagic), kNpyMagicSize);
  w.put<uint8_t>(static_cast<uint8_t>(major));
  w.put<uint8_t>(0);
  if (major == 1) {
    w.put<uint16_t>(static_cast<uint16_t>(header.size()));
  } else {
    w.put<uint32_t>(static_cast<uint32_t>(header.size()));
  }
  w.put_bytes(reinterpret_cast<const uint8_t*>(header.data()), header.size());
  w.put_bytes(a.bytes);
  return w.take();
}

void save_npy(const std::string& path, const HostArray& array) {
  write_file(path, save_npy_to_memory(array), "save_npy");
}

std::pair<std::string, std::string> split_param_name(const std::string& key) {
  if (key.rfind("arg:", 0) == 0) return {"arg", key.substr(4)};
  if (key.rfind("aux:", 0) == 0) return {"aux", key.substr(4)};
  return {"", key};
}

}  // namespace weft
