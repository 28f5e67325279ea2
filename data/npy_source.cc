// npy_files(): rows of memory-mapped `.npy` files as zero-copy read-only views.
//
// Note [Mapped npy rows]
// Each file is mapped read-only (PROT_READ, MAP_PRIVATE) once, when the dataset is made, and
// its header is parsed and checked then. The mapping is owned by a shared_ptr: the node, its
// iterators and every element array made from it (through wrap_host_memory's owner) hold it, so
// it is unmapped when the last of them is gone. Rows are views into the mapping, made without
// copying; their storage is read-only, so an operator cannot write into the file's pages. A row
// whose address is not aligned to its dtype (a hand-made header of odd length) is copied
// instead, as kernels may assume aligned elements. The file must not be truncated while it is
// mapped (the kernel would signal SIGBUS on access), which is what mapping always requires.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "data/sources.h"

namespace weft::data {
namespace {

/// A read-only mapping of a whole file; unmapped when destroyed.
struct FileMapping {
  const uint8_t* data = nullptr;
  size_t size = 0;
  FileMapping() = default;
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  ~FileMapping() {
    if (data != nullptr) ::munmap(const_cast<uint8_t*>(data), size);
  }
};

std::shared_ptr<const FileMapping> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  WEFT_CHECK(fd >= 0) << "npy_files: cannot open '" << path << "': " << std::strerror(errno);
  struct stat st;
  std::string problem;
  if (::fstat(fd, &st) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  }
  if (!problem.empty()) {
    ::close(fd);
    WEFT_THROW(ValueError) << "npy_files: '" << path << "': " << problem;
  }
  auto mapping = std::make_shared<FileMapping>();
  mapping->size = static_cast<size_t>(st.st_size);
  if (mapping->size > 0) {
    void* addr = ::mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      problem = std::strerror(errno);
      ::close(fd);
      WEFT_THROW(ValueError) << "npy_files: cannot map '" << path << "': " << problem;
    }
    mapping->data = static_cast<const uint8_t*>(addr);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return mapping;
}

/// A parsed `.npy` header: where the data starts and what it holds.
struct NpyHeader {
  DType dtype = DType::kUnknown;
  std::vector<int64_t> shape;
  size_t data_offset = 0;
};

/// Parses the Python dict literal of a `.npy` header ({'descr': '<f4', 'fortran_order': False,
/// 'shape': (3, 4), }) strictly: exactly those three keys, string/bool/tuple values.
class NpyHeaderParser {
 public:
  NpyHeaderParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  void parse(std::string* descr, bool* fortran_order, std::vector<int64_t>* shape) {
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      skip_space();
      if (key == "descr" && !seen_descr) {
        *descr = string_literal();
        seen_descr = true;
      } else if (key == "fortran_order" && !seen_order) {
        *fortran_order = bool_literal();
        seen_order = true;
      } else if (key == "shape" && !seen_shape) {
        *shape = tuple_literal();
        seen_shape = true;
      } else {
        fail("unexpected or repeated key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != '}') {
        fail("expected ',' or '}' after the value of '" + key + "'");
      }
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the header dict");
    if (!seen_descr || !seen_order || !seen_shape) {
      fail("the header must have the keys 'descr', 'fortran_order' and 'shape'");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    WEFT_THROW(ValueError) << "npy_files: '" << path_ << "': malformed .npy header at character "
                           << pos_ << ": " << problem;
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string string_literal() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const size_t start = ++pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') fail("escapes are not supported in header strings");
      ++pos_;
    }
    if (pos_ >= text_.size()) fail("unterminated string");
    return std::string(text_.substr(start, pos_++ - start));
  }
  bool bool_literal() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("fortran_order must be True or False");
  }
  std::vector<int64_t> tuple_literal() {
    expect('(');
    std::vector<int64_t> dims;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') fail("expected a dimension (a non-negative integer)");
      int64_t value = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (__builtin_mul_overflow(value, int64_t{10}, &value) ||
            __builtin_add_overflow(value, int64_t{peek() - '0'}, &value)) {
          fail("a dimension overflows int64");
        }
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2's long suffix
      dims.push_back(value);
      if (dims.size() > 32) fail("more than 32 dimensions");
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in the shape");
      }
    }
    ++pos_;
    return dims;
  }

  std::string_view text_;
  const std::string& path_;
  size_t pos_ = 0;
};

/// The dtype of a descr ('<f4', '|u1', ...): little-endian or byte-order-free only.
DType npy_dtype(const std::string& descr, const std::string& path) {
  struct Code {
    const char* text;
    DType dtype;
  };
  static constexpr Code kCodes[] = {
      {"f2", DType::kFloat16}, {"f4", DType::kFloat32}, {"f8", DType::kFloat64},
      {"i1", DType::kInt8},    {"i2", DType::kInt16},   {"i4", DType::kInt32},
      {"i8", DType::kInt64},   {"u1", DType::kUInt8},   {"u2", DType::kUInt16},
      {"u4", DType::kUInt32},  {"u8", DType::kUInt64},  {"b1", DType::kBool},
  };
  if (descr.size() == 3) {
    const char order = descr[0];
    for (const Code& code : kCodes) {
      if (descr.compare(1, 2, code.text) != 0) continue;
      const bool single_byte = dtype_size(code.dtype) == 1;
      if (order == '<' || order == '=' || (single_byte && (order == '|' || order == '>'))) {
        return code.dtype;
      }
      WEFT_CHECK(order != '>') << "npy_files: '" << path << "' holds big-endian data (descr '"
                               << descr
                               << "'); convert it with arr.astype(arr.dtype.newbyteorder('<'))";
    }
  }
  WEFT_THROW(ValueError) << "npy_files: '" << path << "' has the unsupported descr '" << descr
                         << "' (supported: <f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1)";
}

/// Reads and checks the header of a mapped `.npy` file; ValueError naming the file.
NpyHeader parse_npy(const FileMapping& file, const std::string& path) {
  const uint8_t* bytes = file.data;
  const size_t size = file.size;
  WEFT_CHECK(size >= 10 && std::memcmp(bytes, "\x93NUMPY", 6) == 0)
      << "npy_files: '" << path << "' is not a .npy file (the magic \\x93NUMPY is missing)";
  const int major = bytes[6], minor = bytes[7];
  WEFT_CHECK(major >= 1 && major <= 3 && minor == 0)
      << "npy_files: '" << path << "' has the unsupported .npy format version " << major << "."
      << minor << " (1.0, 2.0 and 3.0 are read)";
  size_t header_at = 10, header_length = size_t{bytes[8]} | size_t{bytes[9]} << 8;
  if (major >= 2) {
    WEFT_CHECK(size >= 12) << "npy_files: '" << path << "' is truncated inside its header";
    header_at = 12;
    header_length |= size_t{bytes[10]} << 16 | size_t{bytes[11]} << 24;
  }
  WEFT_CHECK(header_length <= size - header_at)
      << "npy_files: '" << path << "' is truncated: the header announces " << header_length
      << " bytes, the file has " << size - header_at << " after the preamble";
  std::string descr;
  bool fortran_order = false;
  NpyHeader header;
  const std::string_view text(reinterpret_cast<const char*>(bytes + header_at), header_length);
  NpyHeaderParser(text, path).parse(&descr, &fortran_order, &header.shape);
  header.dtype = npy_dtype(descr, path);
  WEFT_CHECK(!fortran_order || header.shape.size() <= 1)
      << "npy_files: '" << path << "' is in Fortran order; save np.ascontiguousarray(arr)";
  WEFT_CHECK(!header.shape.empty())
      << "npy_files: '" << path << "' holds a 0-d array, which has no rows";
  header.data_offset = header_at + header_length;
  const Shape shape(header.shape);
  const size_t data_bytes =
      shape_bytes(shape, dtype_size(header.dtype), "npy_files: '" + path + "'");
  WEFT_CHECK(data_bytes <= size - header.data_offset)
      << "npy_files: '" << path << "' is truncated: shape " << shape << " " << descr << " needs "
      << data_bytes << " bytes of data, the file has " << size - header.data_offset;
  return header;
}

/// One mapped file of a shard.
struct NpyFile {
  std::string path;
  std::shared_ptr<const FileMapping> mapping;
  NpyHeader header;
  Shape row_shape;
  size_t row_bytes = 0;
};

struct NpyShard {
  std::vector<NpyFile> files;
  int64_t rows = 0;
};

struct NpySource {
  std::vector<NpyShard> shards;
  int64_t total_rows = 0;
};

class NpyIterator : public Iterator {
 public:
  explicit NpyIterator(std::shared_ptr<const NpySource> source) : source_(std::move(source)) {}

  std::optional<Element> next() override {
    while (shard_ < source_->shards.size() && row_ >= source_->shards[shard_].rows) {
      ++shard_;
      row_ = 0;
    }
    if (shard_ >= source_->shards.size()) return std::nullopt;
    const NpyShard& shard = source_->shards[shard_];
    Element element;
    element.index = index_++;
    element.origin = shard.files[0].path + " row " + std::to_string(row_);
    for (const NpyFile& file : shard.files) {
      const uint8_t* row =
          file.mapping->data + file.header.data_offset + static_cast<size_t>(row_) * file.row_bytes;
      const size_t item = dtype_size(file.header.dtype);
      if (reinterpret_cast<uintptr_t>(row) % item == 0) {
        element.arrays.push_back(wrap_host_memory(file.mapping, const_cast<uint8_t*>(row),
                                                  file.row_shape, file.header.dtype,
                                                  /*read_only=*/true));
      } else {  // Note [Mapped npy rows]: misaligned rows are copied.
        element.arrays.push_back(NDArray::from_host(row, file.row_shape, file.header.dtype));
      }
    }
    ++row_;
    return element;
  }

 private:
  std::shared_ptr<const NpySource> source_;
  size_t shard_ = 0;
  int64_t row_ = 0;
  int64_t index_ = 0;
};

class NpyNode : public detail::DatasetNode {
 public:
  explicit NpyNode(std::shared_ptr<const NpySource> source) : source_(std::move(source)) {}
  std::unique_ptr<Iterator> make_iterator(const IterContext&) const override {
    return std::make_unique<NpyIterator>(source_);
  }
  std::string describe() const override {
    std::string text = "npy_files(";
    const size_t shown = std::min<size_t>(source_->shards.size(), 3);
    for (size_t i = 0; i < shown; ++i) {
      if (i > 0) text += ", ";
      text += "[";
      for (size_t j = 0; j < source_->shards[i].files.size(); ++j) {
        text += (j > 0 ? ", " : "") + source_->shards[i].files[j].path;
      }
      text += "]";
    }
    if (shown < source_->shards.size()) {
      text += ", ... (" + std::to_string(source_->shards.size()) + " shards)";
    }
    return text + ")";
  }
  int64_t cardinality() const override { return source_->total_rows; }

 private:
  std::shared_ptr<const NpySource> source_;
};

}  // namespace

Dataset npy_files(std::vector<std::vector<std::string>> shards) {
  WEFT_CHECK(!shards.empty()) << "npy_files: no shards given";
  auto source = std::make_shared<NpySource>();
  const size_t arity = shards[0].size();
  for (size_t s = 0; s < shards.size(); ++s) {
    WEFT_CHECK(!shards[s].empty()) << "npy_files: shard " << s << " has no files";
    WEFT_CHECK(shards[s].size() == arity)
        << "npy_files: shard " << s << " has " << shards[s].size() << " files ('" << shards[s][0]
        << "', ...) but shard 0 has " << arity << "; every shard is a tuple of the same arity";
    NpyShard shard;
    for (const std::string& path : shards[s]) {
      NpyFile file;
      file.path = path;
      file.mapping = map_file(path);
      file.header = parse_npy(*file.mapping, path);
      const std::vector<int64_t>& dims = file.header.shape;
      file.row_shape = Shape(dims.begin() + 1, dims.end());
      file.row_bytes = static_cast<size_t>(file.row_shape.size()) * dtype_size(file.header.dtype);
      if (!shard.files.empty()) {
        WEFT_CHECK(dims[0] == shard.rows)
            << "npy_files: '" << path << "' has " << dims[0] << " rows but '" << shard.files[0].path
            << "' in the same shard has " << shard.rows;
      }
      shard.rows = dims[0];
      shard.files.push_back(std::move(file));
    }
    source->total_rows += shard.rows;
    source->shards.push_back(std::move(shard));
  }
  return Dataset(std::make_shared<NpyNode>(std::move(source)));
}

}  // namespace weft::data
