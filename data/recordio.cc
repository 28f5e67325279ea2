// MXNet RecordIO: the record framing (parts, padding), image records, `.idx` files, the
// recordio() source and RecordIOWriter.
//
// Note [RecordIO framing]
// A record is one or more parts. Each part is the magic word 0xced7230a (u32 LE), then lrecord
// (u32 LE: cflag = lrecord >> 29, length = lrecord & (2^29 - 1)), then `length` payload bytes,
// then zeros up to a multiple of 4. cflag 0 is a whole record; 1, 2, 3 are the first, middle
// and last parts of a split one. MXNet's writer (dmlc-core) splits a record at every 4-aligned
// occurrence of the magic word in its data and drops that word, so that scanning a file for
// the magic finds record starts only; its reader joins the parts and puts the magic word back
// between them. Both directions here do exactly the same, so files are byte-identical to
// MXNet's. Every length is checked against the file's size before anything is read or
// allocated, so a corrupt file costs at most its own size in memory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "data/recordio_parse.h"
#include "data/sources.h"

namespace weft::data {
namespace detail {
namespace {

uint32_t load_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

uint64_t load_u64(const uint8_t* p) {
  return uint64_t{load_u32(p)} | uint64_t{load_u32(p + 4)} << 32;
}

float load_f32(const uint8_t* p) {
  const uint32_t bits = load_u32(p);
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint64_t align4(uint64_t n) { return (n + 3) & ~uint64_t{3}; }

std::string hex32(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%08x", v);
  return text;
}

}  // namespace

std::string record_origin(const std::string& name, int64_t record, uint64_t offset) {
  return name + " record " + std::to_string(record) + " (byte " + std::to_string(offset) + ")";
}

namespace {

[[noreturn]] void fail_record(const std::string& name, int64_t record, uint64_t offset,
                              const std::string& problem) {
  const std::string origin = record_origin(name, record, offset);
  throw DataError("recordio: " + origin + ": " + problem, record, origin);
}

}  // namespace

RecordLayout locate_record(const ReadAt& read, uint64_t file_size, uint64_t offset, int64_t record,
                           const std::string& name) {
  RecordLayout layout;
  layout.offset = offset;
  uint64_t at = offset;
  while (true) {
    if (at > file_size || file_size - at < 8) {
      fail_record(name, record, offset,
                  "truncated part header at byte " + std::to_string(at) + " (the file has " +
                      std::to_string(file_size) + " bytes; a part header needs 8)");
    }
    uint8_t head[8];
    read(at, head, sizeof(head));
    const uint32_t magic = load_u32(head);
    if (magic != kRecordIOMagic) {
      fail_record(name, record, offset,
                  "bad magic " + hex32(magic) + " at byte " + std::to_string(at) + " (expected " +
                      hex32(kRecordIOMagic) + ")");
    }
    const uint32_t lrecord = load_u32(head + 4);
    const uint32_t cflag = lrecord >> 29;
    const uint32_t length = lrecord & kRecordIOMaxPartLength;
    const bool first = layout.parts == 0;
    if (first && (cflag == 2 || cflag == 3)) {
      fail_record(name, record, offset,
                  "a record starts with a continuation part (cflag " + std::to_string(cflag) +
                      ") at byte " + std::to_string(at));
    }
    if (!first && (cflag == 0 || cflag == 1)) {
      fail_record(name, record, offset,
                  "part " + std::to_string(layout.parts) + " at byte " + std::to_string(at) +
                      " has cflag " + std::to_string(cflag) +
                      " inside a multi-part record (expected 2 or 3)");
    }
    const uint64_t payload = at + 8;
    if (align4(length) > file_size - payload) {
      fail_record(name, record, offset,
                  "part at byte " + std::to_string(at) + " has length " + std::to_string(length) +
                      " (padded " + std::to_string(align4(length)) +
                      "), past the end of the file (" + std::to_string(file_size - payload) +
                      " bytes remain)");
    }
    layout.size += length + (first ? 0 : 4);
    ++layout.parts;
    at = payload + align4(length);
    if (cflag == 0 || cflag == 3) break;
  }
  layout.end = at;
  return layout;
}

void read_record(const ReadAt& read, const RecordLayout& layout, int64_t record,
                 const std::string& name, uint8_t* dst) {
  uint64_t at = layout.offset, written = 0;
  for (uint64_t part = 0; part < layout.parts; ++part) {
    uint8_t head[8];
    read(at, head, sizeof(head));
    const uint32_t length = load_u32(head + 4) & kRecordIOMaxPartLength;
    const uint64_t needed = length + (part == 0 ? 0 : 4);
    if (load_u32(head) != kRecordIOMagic || needed > layout.size - written) {
      fail_record(name, record, layout.offset, "the file changed while it was read");
    }
    if (part != 0) {
      for (int i = 0; i < 4; ++i) dst[written++] = static_cast<uint8_t>(kRecordIOMagic >> (8 * i));
    }
    if (length > 0) read(at + 8, dst + written, length);
    written += length;
    at += 8 + align4(length);
  }
  if (written != layout.size) {
    fail_record(name, record, layout.offset, "the file changed while it was read");
  }
}

void append_record(std::vector<uint8_t>& out, const void* data, size_t size) {
  WEFT_CHECK(size <= kRecordIOMaxPartLength)
      << "recordio: a record of " << size << " bytes is too large (at most 2^29 - 1 bytes)";
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  auto put_part = [&](uint32_t cflag, size_t begin, size_t end) {
    put_u32(out, kRecordIOMagic);
    put_u32(out, cflag << 29 | static_cast<uint32_t>(end - begin));
    out.insert(out.end(), bytes + begin, bytes + end);
  };
  // Note [RecordIO framing]: split at every 4-aligned magic word, which is dropped.
  size_t start = 0;
  bool split = false;
  for (size_t i = 0; i + 4 <= size; i += 4) {
    if (load_u32(bytes + i) == kRecordIOMagic) {
      put_part(split ? 2 : 1, start, i);
      split = true;
      start = i + 4;
    }
  }
  put_part(split ? 3 : 0, start, size);
  out.resize(out.size() + (align4(size) - size), 0);
}

ImageRecord parse_image_record(const uint8_t* data, size_t size, int64_t record,
                               const std::string& origin) {
  auto fail = [&](const std::string& problem) {
    throw DataError("recordio: " + origin + ": " + problem, record, origin);
  };
  if (size < kIRHeaderSize) {
    fail("an image record of " + std::to_string(size) + " bytes is shorter than the " +
         std::to_string(kIRHeaderSize) + "-byte IRHeader");
  }
  ImageRecord r;
  r.flag = load_u32(data);
  r.id = load_u64(data + 8);
  r.id2 = load_u64(data + 16);
  const uint64_t label_bytes = uint64_t{r.flag} * 4;
  if (label_bytes > size - kIRHeaderSize) {
    fail("the IRHeader's flag " + std::to_string(r.flag) + " announces " + std::to_string(r.flag) +
         " float labels (" + std::to_string(label_bytes) + " bytes) but only " +
         std::to_string(size - kIRHeaderSize) + " bytes follow it");
  }
  if (r.flag == 0) {
    r.labels.push_back(load_f32(data + 4));
  } else {
    r.labels.resize(r.flag);
    for (uint32_t i = 0; i < r.flag; ++i) r.labels[i] = load_f32(data + kIRHeaderSize + 4 * i);
  }
  r.image_offset = kIRHeaderSize + label_bytes;
  return r;
}

std::vector<uint64_t> parse_recordio_index(const std::string& text, const std::string& what) {
  std::vector<uint64_t> offsets;
  size_t begin = 0;
  for (int64_t line_number = 1; begin < text.size(); ++line_number) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + begin, end - begin);
    begin = end + 1;
    // Python's str.strip(), as MXNet's reader does.
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) {
      line.remove_prefix(1);
    }
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) {
      line.remove_suffix(1);
    }
    if (line.empty()) continue;
    auto fail = [&](const std::string& problem) {
      const std::string shown(line.substr(0, 60));
      WEFT_THROW(ValueError) << "recordio: index " << what << " line " << line_number << ": "
                             << problem << " (expected 'key<TAB>offset', got '" << shown
                             << (line.size() > 60 ? "..." : "") << "')";
    };
    const size_t tab = line.find('\t');
    if (tab == std::string_view::npos) fail("no tab");
    std::string_view key = line.substr(0, tab), value = line.substr(tab + 1);
    if (!key.empty() && (key[0] == '-' || key[0] == '+')) key.remove_prefix(1);
    if (key.empty() || key.find_first_not_of("0123456789") != std::string_view::npos) {
      fail("the key is not an integer");
    }
    if (value.empty() || value.find_first_not_of("0123456789") != std::string_view::npos) {
      fail("the offset is not a non-negative integer");
    }
    uint64_t offset = 0;
    for (char c : value) {
      if (__builtin_mul_overflow(offset, uint64_t{10}, &offset) ||
          __builtin_add_overflow(offset, uint64_t(c - '0'), &offset)) {
        fail("the offset overflows 64 bits");
      }
    }
    offsets.push_back(offset);
  }
  return offsets;
}

std::vector<std::vector<uint8_t>> read_records_from_memory(const void* data, size_t size,
                                                           const std::string& what) {
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  const ReadAt read = [bytes](uint64_t offset, void* dst, size_t n) {
    std::memcpy(dst, bytes + offset, n);
  };
  std::vector<std::vector<uint8_t>> records;
  uint64_t at = 0;
  for (int64_t record = 0; at < size; ++record) {
    const RecordLayout layout = locate_record(read, size, at, record, what);
    std::vector<uint8_t> joined(layout.size);
    read_record(read, layout, record, what, joined.data());
    records.push_back(std::move(joined));
    at = layout.end;
  }
  return records;
}

}  // namespace detail

namespace {

using detail::ReadAt;
using detail::RecordLayout;

std::string errno_text() { return std::strerror(errno); }

/// What recordio() found when it was made; shared by its iterators.
struct RecordIOSource {
  std::string path;
  std::string idx_path;
  bool image_records = false;
  bool indexed = false;
  /// The record offsets from the index, in index order (indexed only).
  std::vector<uint64_t> offsets;
};

/// Reads records through pread on its own descriptor. Indexed: record i is at offsets[i], and
/// a corrupt record throws once, then the next one is read. Scanning: the records follow each
/// other, and a corrupt framing leaves no way to find the next record: it throws once and the
/// iteration ends there (so ignore_errors() ends too instead of skipping the same error forever).
class RecordIOIterator : public Iterator {
 public:
  explicit RecordIOIterator(std::shared_ptr<const RecordIOSource> source)
      : source_(std::move(source)) {
    fd_ = ::open(source_->path.c_str(), O_RDONLY | O_CLOEXEC);
    WEFT_CHECK(fd_ >= 0) << "recordio: cannot open '" << source_->path << "': " << errno_text();
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
      const std::string problem = errno_text();
      ::close(fd_);
      WEFT_THROW(ValueError) << "recordio: cannot stat '" << source_->path << "': " << problem;
    }
    file_size_ = static_cast<uint64_t>(st.st_size);
    read_ = [this](uint64_t offset, void* dst, size_t n) { read_at(offset, dst, n); };
  }
  ~RecordIOIterator() override { ::close(fd_); }
  RecordIOIterator(const RecordIOIterator&) = delete;
  RecordIOIterator& operator=(const RecordIOIterator&) = delete;

  std::optional<Element> next() override {
    if (broken_) return std::nullopt;  // the error was delivered; nothing after it is reachable
    if (source_->indexed) {
      if (next_record_ >= static_cast<int64_t>(source_->offsets.size())) return std::nullopt;
      const int64_t record = next_record_++;
      const uint64_t offset = source_->offsets[record];
      current_ = {record, offset};
      return make_element(record, offset, locate(record, offset));
    }
    if (next_offset_ >= file_size_) return std::nullopt;
    const int64_t record = next_record_;
    const uint64_t offset = next_offset_;
    current_ = {record, offset};
    RecordLayout layout;
    try {
      layout = locate(record, offset);
    } catch (const DataError& e) {
      broken_ = e;
      throw;
    }
    ++next_record_;
    next_offset_ = layout.end;
    return make_element(record, offset, layout);
  }

 private:
  RecordLayout locate(int64_t record, uint64_t offset) const {
    return detail::locate_record(read_, file_size_, offset, record, source_->path);
  }

  void read_at(uint64_t offset, void* dst, size_t n) const {
    uint8_t* out = static_cast<uint8_t*>(dst);
    while (n > 0) {
      const ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        const std::string origin =
            detail::record_origin(source_->path, current_.first, current_.second);
        const std::string problem =
            got < 0 ? errno_text() : "unexpected end of file (the file shrank while read)";
        throw DataError(
            "recordio: " + origin + ": reading byte " + std::to_string(offset) + ": " + problem,
            current_.first, origin);
      }
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
  }

  Element make_element(int64_t record, uint64_t offset, const RecordLayout& layout) const {
    Element element;
    element.index = record;
    element.origin = detail::record_origin(source_->path, record, offset);
    NDArray bytes = NDArray::empty(Shape{static_cast<int64_t>(layout.size)}, DType::kUInt8);
    uint8_t* data = static_cast<uint8_t*>(bytes.raw_data());
    detail::read_record(read_, layout, record, source_->path, data);
    if (!source_->image_records) {
      element.arrays.push_back(std::move(bytes));
      return element;
    }
    const detail::ImageRecord header =
        detail::parse_image_record(data, layout.size, record, element.origin);
    const int64_t num_labels = static_cast<int64_t>(header.labels.size());
    // The image is a view of the record's storage: no copy.
    element.arrays.push_back(
        bytes.slice(static_cast<int64_t>(header.image_offset), static_cast<int64_t>(layout.size)));
    element.arrays.push_back(
        NDArray::from_host(header.labels.data(), Shape{num_labels}, DType::kFloat32));
    return element;
  }

  std::shared_ptr<const RecordIOSource> source_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  ReadAt read_;
  int64_t next_record_ = 0;
  uint64_t next_offset_ = 0;
  /// The record being read (number, offset), for errors raised by read_at.
  std::pair<int64_t, uint64_t> current_{0, 0};
  std::optional<DataError> broken_;
};

class RecordIONode : public detail::DatasetNode {
 public:
  explicit RecordIONode(std::shared_ptr<const RecordIOSource> source)
      : source_(std::move(source)) {}
  std::unique_ptr<Iterator> make_iterator(const IterContext&) const override {
    return std::make_unique<RecordIOIterator>(source_);
  }
  std::string describe() const override {
    std::string text = "recordio(" + source_->path;
    if (source_->indexed) text += ", idx " + source_->idx_path;
    if (source_->image_records) text += ", image records";
    return text + ")";
  }
  int64_t cardinality() const override {
    return source_->indexed ? static_cast<int64_t>(source_->offsets.size()) : kUnknownCardinality;
  }

 private:
  std::shared_ptr<const RecordIOSource> source_;
};

/// The whole of a (small) text file; ValueError naming it when it cannot be read.
std::string read_text_file(const std::string& path, const char* what) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  WEFT_CHECK(file != nullptr) << what << ": cannot open '" << path << "': " << errno_text();
  std::string text;
  char buffer[65536];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, got);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  WEFT_CHECK(!failed) << what << ": cannot read '" << path << "'";
  return text;
}

}  // namespace

Dataset recordio(const std::string& rec_path, RecordIOOptions options) {
  auto source = std::make_shared<RecordIOSource>();
  source->path = rec_path;
  source->idx_path = options.idx_path;
  source->image_records = options.image_records;
  struct stat st;
  WEFT_CHECK(::stat(rec_path.c_str(), &st) == 0)
      << "recordio: cannot open '" << rec_path << "': " << errno_text();
  WEFT_CHECK(S_ISREG(st.st_mode)) << "recordio: '" << rec_path << "' is not a regular file";
  if (!options.idx_path.empty()) {
    source->indexed = true;
    source->offsets = detail::parse_recordio_index(
        read_text_file(options.idx_path, "recordio: index"), options.idx_path);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    for (size_t i = 0; i < source->offsets.size(); ++i) {
      WEFT_CHECK(source->offsets[i] < size)
          << "recordio: index " << options.idx_path << " entry " << i << ": offset "
          << source->offsets[i] << " is past the end of '" << rec_path << "' (" << size
          << " bytes)";
    }
  }
  return Dataset(std::make_shared<RecordIONode>(std::move(source)));
}

// ---- RecordIOWriter -----------------------------------------------------------------------------

struct RecordIOWriter::Impl {
  std::string rec_path, idx_path;
  std::FILE* rec = nullptr;
  std::FILE* idx = nullptr;
  uint64_t position = 0;
  std::vector<uint8_t> buffer;
};

RecordIOWriter::RecordIOWriter(const std::string& rec_path, const std::string& idx_path)
    : impl_(std::make_unique<Impl>()) {
  impl_->rec_path = rec_path;
  impl_->idx_path = idx_path;
  impl_->rec = std::fopen(rec_path.c_str(), "wb");
  WEFT_CHECK(impl_->rec != nullptr)
      << "RecordIOWriter: cannot open '" << rec_path << "' for writing: " << errno_text();
  if (!idx_path.empty()) {
    impl_->idx = std::fopen(idx_path.c_str(), "w");
    if (impl_->idx == nullptr) {
      const std::string problem = errno_text();
      std::fclose(impl_->rec);
      impl_->rec = nullptr;
      WEFT_THROW(ValueError) << "RecordIOWriter: cannot open '" << idx_path
                             << "' for writing: " << problem;
    }
  }
}

RecordIOWriter::~RecordIOWriter() {
  try {
    close();
  } catch (const Error&) {
    // A destructor cannot report the error; close() explicitly to see it.
  }
}

void RecordIOWriter::write(const void* data, size_t size, uint64_t key) {
  Impl& w = *impl_;
  WEFT_CHECK(w.rec != nullptr) << "RecordIOWriter: write to '" << w.rec_path << "' after close()";
  w.buffer.clear();
  detail::append_record(w.buffer, data, size);
  WEFT_CHECK(std::fwrite(w.buffer.data(), 1, w.buffer.size(), w.rec) == w.buffer.size())
      << "RecordIOWriter: writing '" << w.rec_path << "' failed: " << errno_text();
  if (w.idx != nullptr) {
    WEFT_CHECK(std::fprintf(w.idx, "%llu\t%llu\n", static_cast<unsigned long long>(key),
                            static_cast<unsigned long long>(w.position)) > 0)
        << "RecordIOWriter: writing '" << w.idx_path << "' failed: " << errno_text();
  }
  w.position += w.buffer.size();
}

void RecordIOWriter::write_image(const std::vector<float>& labels, const void* image, size_t size,
                                 uint64_t key) {
  WEFT_CHECK(!labels.empty()) << "RecordIOWriter::write_image: an image record needs a label";
  const uint32_t flag = labels.size() > 1 ? static_cast<uint32_t>(labels.size()) : 0;
  WEFT_CHECK(labels.size() <= detail::kRecordIOMaxPartLength / 4 &&
             size <= detail::kRecordIOMaxPartLength &&
             detail::kIRHeaderSize + 4 * uint64_t{flag} + size <= detail::kRecordIOMaxPartLength)
      << "RecordIOWriter::write_image: a record of " << labels.size() << " labels and " << size
      << " image bytes is too large (at most 2^29 - 1 bytes)";
  std::vector<uint8_t> record(detail::kIRHeaderSize + 4 * size_t{flag} + size);
  auto put = [&](size_t at, const void* value, size_t n) { std::memcpy(&record[at], value, n); };
  const float header_label = flag == 0 ? labels[0] : 0.0f;
  const uint64_t id2 = 0;
  // IRHeader, little-endian like every supported host (the layout is MXNet's struct 'IfQQ').
  static_assert(std::endian::native == std::endian::little);
  put(0, &flag, 4);
  put(4, &header_label, 4);
  put(8, &key, 8);
  put(16, &id2, 8);
  if (flag > 0) put(detail::kIRHeaderSize, labels.data(), 4 * size_t{flag});
  if (size > 0) put(detail::kIRHeaderSize + 4 * size_t{flag}, image, size);
  write(record.data(), record.size(), key);
}

void RecordIOWriter::close() {
  Impl& w = *impl_;
  std::string problem;  // the first failure
  if (w.rec != nullptr) {
    if (std::fclose(w.rec) != 0) problem = "'" + w.rec_path + "': " + errno_text();
    w.rec = nullptr;
  }
  if (w.idx != nullptr) {
    if (std::fclose(w.idx) != 0 && problem.empty()) {
      problem = "'" + w.idx_path + "': " + errno_text();
    }
    w.idx = nullptr;
  }
  WEFT_CHECK(problem.empty()) << "RecordIOWriter: closing " << problem;
}

}  // namespace weft::data
