// Dataset::cache: the first complete pass is kept in memory or in a file and replayed on later
// passes without running the stages above it.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>

#include "data/dataset.h"
#include "data/stage_util.h"

namespace weft::data {

namespace {

using detail::DatasetNode;
using NodePtr = std::shared_ptr<const DatasetNode>;

// Note [Cache file layout]: "WEFTDSC1" (8 bytes), then per element: u32 array count, i64 index,
// u32 origin length, origin bytes, and per array: i32 dtype (MXNet's flag), i32 ndim, ndim x i64
// dims, the C-order bytes. Little-endian, as written by this machine. The file is written as
// PATH.tmp and renamed to PATH when the pass completes, so a file at PATH is always complete.
constexpr char kMagic[8] = {'W', 'E', 'F', 'T', 'D', 'S', 'C', '1'};

struct CacheState {
  std::mutex mutex;
  bool complete = false;  // memory: `elements` holds a whole pass
  bool filling = false;   // an iterator is writing the cache now
  std::vector<Element> elements;
};

class CacheNode final : public DatasetNode {
 public:
  CacheNode(NodePtr input, std::string path)
      : input_(std::move(input)), path_(std::move(path)), state_(std::make_shared<CacheState>()) {}
  std::unique_ptr<Iterator> make_iterator(const IterContext& ctx) const override;
  std::string describe() const override {
    return "cache(" + (path_.empty() ? std::string("memory") : path_) + ") <- " +
           input_->describe();
  }
  int64_t cardinality() const override { return input_->cardinality(); }

  NodePtr input_;
  std::string path_;
  std::shared_ptr<CacheState> state_;
};

Element copy_element(const Element& e) {
  Element out;
  out.index = e.index;
  out.origin = e.origin;
  out.arrays.reserve(e.arrays.size());
  for (const NDArray& a : e.arrays) out.arrays.push_back(detail::copy_host(a));
  return out;
}

// Replays the memory cache; hands out copies so a consumer writing its arrays in place cannot
// change later passes.
class MemoryReplay final : public Iterator {
 public:
  explicit MemoryReplay(std::shared_ptr<CacheState> state) : state_(std::move(state)) {}
  std::optional<Element> next() override {
    if (pos_ >= state_->elements.size()) return std::nullopt;
    return copy_element(state_->elements[pos_++]);
  }

 private:
  std::shared_ptr<CacheState> state_;  // complete: no longer written
  size_t pos_ = 0;
};

class FileReplay final : public Iterator {
 public:
  explicit FileReplay(std::string path) : path_(std::move(path)), file_(nullptr, &std::fclose) {
    file_.reset(std::fopen(path_.c_str(), "rb"));
    WEFT_CHECK(file_ != nullptr) << "cache: cannot open " << path_ << ": " << std::strerror(errno);
    std::error_code ec;
    const auto size = std::filesystem::file_size(path_, ec);
    WEFT_CHECK(!ec) << "cache: cannot read the size of " << path_ << ": " << ec.message();
    size_ = static_cast<uint64_t>(size);
    char magic[8];
    read(magic, 8, "the header");
    if (std::memcmp(magic, kMagic, 8) != 0) corrupt("the header is not a weft cache file");
  }
  std::optional<Element> next() override {
    // After a damaged element the position in the file is lost: the replay ends there.
    if (broken_) return std::nullopt;
    try {
      return read_element();
    } catch (const DataError&) {
      broken_ = true;
      throw;
    }
  }

 private:
  std::optional<Element> read_element() {
    offset_ = pos_;
    if (pos_ == size_) return std::nullopt;  // end of file
    uint32_t count = 0, origin_len = 0;
    Element e;
    read(&count, 4, "an element's array count");
    read(&e.index, 8, "an element's index");
    read(&origin_len, 4, "an element's origin");
    if (origin_len > (1u << 16) || count > (1u << 16)) corrupt("implausible element header");
    e.origin.resize(origin_len);
    read(e.origin.data(), origin_len, "an element's origin");
    for (uint32_t i = 0; i < count; ++i) {
      int32_t flag = 0, ndim = 0;
      read(&flag, 4, "an array's dtype");
      read(&ndim, 4, "an array's rank");
      if (ndim < 0 || ndim > 32) corrupt("an array's rank is " + std::to_string(ndim));
      std::vector<int64_t> dims(ndim);
      read(dims.data(), 8 * dims.size(), "an array's shape");
      DType dtype = DType::kUnknown;
      try {
        dtype = dtype_from_flag(flag);
      } catch (const Error&) {
        corrupt("an array's dtype flag is " + std::to_string(flag));
      }
      // The bytes the header announces must be in the file before anything is allocated.
      uint64_t bytes = dtype_size(dtype);
      for (int64_t d : dims) {
        if (d < 0) corrupt("an array's dimension is " + std::to_string(d));
        if (d > 0 && bytes > (size_ - pos_) / static_cast<uint64_t>(d)) {
          corrupt("an array announces more data than the file holds");
        }
        bytes *= static_cast<uint64_t>(d);
      }
      NDArray a = NDArray::empty(Shape(dims), dtype, Device::cpu());
      read(a.raw_data(), a.nbytes(), "an array's data");
      e.arrays.push_back(std::move(a));
    }
    return e;
  }
  void read(void* dst, size_t bytes, const char* what) {
    if (bytes > size_ - pos_ || (bytes > 0 && std::fread(dst, 1, bytes, file_.get()) != bytes)) {
      corrupt(std::string("truncated in ") + what);
    }
    pos_ += bytes;
  }
  [[noreturn]] void corrupt(const std::string& what) {
    throw DataError("cache: " + path_ + " at byte " + std::to_string(offset_) + ": " + what, -1,
                    path_);
  }
  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  uint64_t size_ = 0;
  uint64_t pos_ = 0;
  uint64_t offset_ = 0;  // where the element being read starts
  bool broken_ = false;
};

// Passes the input through and records it; commits the recording when the input ends.
class FillingIterator final : public Iterator {
 public:
  FillingIterator(const CacheNode& node, std::unique_ptr<Iterator> input)
      : node_(node), input_(std::move(input)) {
    if (!node_.path_.empty()) {
      tmp_path_ = node_.path_ + ".tmp";
      file_ = std::fopen(tmp_path_.c_str(), "wb");
      WEFT_CHECK(file_ != nullptr)
          << "cache: cannot write " << tmp_path_ << ": " << std::strerror(errno);
      write(kMagic, 8);
    }
  }
  ~FillingIterator() override {
    if (file_ != nullptr) {  // the pass did not complete: nothing is kept
      std::fclose(file_);
      std::error_code ec;
      std::filesystem::remove(tmp_path_, ec);
    }
    std::lock_guard<std::mutex> lock(node_.state_->mutex);
    node_.state_->filling = false;
    if (!node_.state_->complete) node_.state_->elements.clear();
  }
  std::optional<Element> next() override {
    std::optional<Element> e = input_->next();  // a failed element is passed on, not cached
    if (!e) {
      commit();
      return e;
    }
    detail::check_host_arrays(*e, "cache");
    if (file_ != nullptr) {
      append(*e);
    } else if (!abandoned_) {
      recorded_.push_back(copy_element(*e));
    }
    return e;
  }
  void collect_stats(IteratorStats& stats) const override { input_->collect_stats(stats); }

 private:
  void write(const void* data, size_t bytes) {
    if (bytes > 0 && std::fwrite(data, 1, bytes, file_) != bytes) {
      const std::string problem = std::strerror(errno);
      abandon();  // a half-written element must never become a cache file
      WEFT_THROW(ValueError) << "cache: writing " << tmp_path_ << " failed: " << problem
                             << " (this pass is not cached)";
    }
  }
  // Gives up the file: the pass goes on uncached.
  void abandon() {
    if (file_ == nullptr) return;
    std::fclose(file_);
    file_ = nullptr;
    abandoned_ = true;
    std::error_code ec;
    std::filesystem::remove(tmp_path_, ec);
  }
  void append(const Element& e) {
    const auto count = static_cast<uint32_t>(e.arrays.size());
    const auto origin_len = static_cast<uint32_t>(e.origin.size());
    write(&count, 4);
    write(&e.index, 8);
    write(&origin_len, 4);
    write(e.origin.data(), origin_len);
    for (const NDArray& a : e.arrays) {
      const auto flag = static_cast<int32_t>(a.dtype());
      const int32_t ndim = a.ndim();
      write(&flag, 4);
      write(&ndim, 4);
      write(a.shape().data(), 8 * static_cast<size_t>(ndim));
      write(a.raw_data(), a.nbytes());
    }
  }
  void commit() {
    if (committed_ || abandoned_) return;
    committed_ = true;
    if (file_ != nullptr) {
      const bool ok = std::fclose(file_) == 0;
      file_ = nullptr;
      std::error_code ec;
      if (ok) std::filesystem::rename(tmp_path_, node_.path_, ec);
      WEFT_CHECK(ok && !ec) << "cache: could not complete " << node_.path_;
      return;
    }
    std::lock_guard<std::mutex> lock(node_.state_->mutex);
    node_.state_->elements = std::move(recorded_);
    node_.state_->complete = true;
  }

  const CacheNode& node_;
  std::unique_ptr<Iterator> input_;
  std::vector<Element> recorded_;
  std::string tmp_path_;
  std::FILE* file_ = nullptr;
  bool committed_ = false;
  bool abandoned_ = false;  // writing the file failed: this pass is not cached
};

std::unique_ptr<Iterator> CacheNode::make_iterator(const IterContext& ctx) const {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (path_.empty() && state_->complete) return std::make_unique<MemoryReplay>(state_);
    if (!path_.empty() && std::filesystem::exists(path_)) {
      return std::make_unique<FileReplay>(path_);
    }
    if (state_->filling) return input_->make_iterator(ctx);  // another pass records
    state_->filling = true;
  }
  try {
    return std::make_unique<FillingIterator>(*this, input_->make_iterator(ctx));
  } catch (...) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->filling = false;
    throw;
  }
}

}  // namespace

Dataset Dataset::cache(std::string path) const {
  return Dataset(std::make_shared<CacheNode>(node_, std::move(path)));
}

}  // namespace weft::data
