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
#include "ndarray/serialize.h"

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

/// Reads and checks the header of a mapped `.npy` file (ndarray/serialize's parser, which also
/// checks that the data fits); ValueError naming the file.
NpyHeader parse_npy(const FileMapping& file, const std::string& path) {
  NpyHeader header = parse_npy_header(file.data, file.size, path, "npy_files");
  WEFT_CHECK(header.shape.ndim() >= 1)
      << "npy_files: '" << path << "' holds a 0-d array, which has no rows";
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
      const Shape& dims = file.header.shape;
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
