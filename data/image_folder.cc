// image_folder(): the image files under a root folder with one subfolder per class, listed (and
// labelled) when the dataset is made and read when iterated. The listing follows MXNet's
// gluon.data.vision.ImageFolderDataset: every subfolder is a class (sorted by name, so labels
// are stable), and the files whose extension is taken are sorted by name within it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "data/sources.h"

namespace weft::data {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

/// The names of the entries of `dir` for which `keep` is true, sorted (byte order, which is
/// code point order for UTF-8 names, as Python's sorted() gives). ValueError naming `dir`.
template <typename Keep>
std::vector<std::string> sorted_entries(const fs::path& dir, Keep keep) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  WEFT_CHECK(!ec) << "image_folder: cannot list '" << dir.string() << "': " << ec.message();
  std::vector<std::string> names;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (keep(*it)) names.push_back(it->path().filename().string());
  }
  WEFT_CHECK(!ec) << "image_folder: cannot list '" << dir.string() << "': " << ec.message();
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> list_classes(const std::string& root) {
  std::error_code ec;
  WEFT_CHECK(fs::exists(root, ec)) << "image_folder: the root '" << root << "' does not exist";
  WEFT_CHECK(fs::is_directory(root, ec))
      << "image_folder: the root '" << root << "' is not a folder";
  std::vector<std::string> classes = sorted_entries(root, [](const fs::directory_entry& entry) {
    std::error_code ignored;
    return entry.is_directory(ignored);  // follows symbolic links
  });
  WEFT_CHECK(!classes.empty()) << "image_folder: '" << root
                               << "' has no subfolders (one subfolder per class is expected)";
  return classes;
}

struct ImageFile {
  std::string path;
  int32_t label;
};

/// Reads a whole file into a new uint8 array; DataError naming it (element `index`).
NDArray read_file_bytes(const std::string& path, int64_t index) {
  auto fail = [&](const std::string& problem) {
    throw DataError("image_folder: cannot read '" + path + "': " + problem, index, path);
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const std::string problem = std::strerror(errno);
    ::close(fd);
    fail(problem);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("not a regular file");
  }
  NDArray bytes;
  try {
    bytes = NDArray::empty(Shape{static_cast<int64_t>(st.st_size)}, DType::kUInt8);
  } catch (...) {
    ::close(fd);
    throw;
  }
  uint8_t* out = static_cast<uint8_t*>(bytes.raw_data());
  size_t done = 0;
  const size_t size = static_cast<size_t>(st.st_size);
  while (done < size) {
    const ssize_t got = ::read(fd, out + done, size - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const std::string problem =
          got < 0 ? std::string(std::strerror(errno)) : "the file shrank while it was read";
      ::close(fd);
      fail(problem);
    }
    done += static_cast<size_t>(got);
  }
  ::close(fd);
  return bytes;
}

class ImageFolderIterator : public Iterator {
 public:
  explicit ImageFolderIterator(std::shared_ptr<const std::vector<ImageFile>> files)
      : files_(std::move(files)) {}

  std::optional<Element> next() override {
    if (next_ >= files_->size()) return std::nullopt;
    const int64_t index = static_cast<int64_t>(next_);
    const ImageFile& file = (*files_)[next_++];
    Element element;
    element.index = index;
    element.origin = file.path;
    element.arrays.push_back(read_file_bytes(file.path, index));
    element.arrays.push_back(
        NDArray::from_host(&file.label, Shape(std::vector<int64_t>{}), DType::kInt32));
    return element;
  }

 private:
  std::shared_ptr<const std::vector<ImageFile>> files_;
  size_t next_ = 0;
};

class ImageFolderNode : public detail::DatasetNode {
 public:
  ImageFolderNode(std::string root, std::shared_ptr<const std::vector<ImageFile>> files)
      : root_(std::move(root)), files_(std::move(files)) {}
  std::unique_ptr<Iterator> make_iterator(const IterContext&) const override {
    return std::make_unique<ImageFolderIterator>(files_);
  }
  std::string describe() const override { return "image_folder(" + root_ + ")"; }
  int64_t cardinality() const override { return static_cast<int64_t>(files_->size()); }

 private:
  std::string root_;
  std::shared_ptr<const std::vector<ImageFile>> files_;
};

}  // namespace

std::vector<std::string> image_folder_classes(const std::string& root) {
  return list_classes(root);
}

Dataset image_folder(const std::string& root, ImageFolderOptions options) {
  std::vector<std::string> extensions;
  for (const std::string& extension : options.extensions) extensions.push_back(lower(extension));
  const std::vector<std::string> classes = list_classes(root);
  auto files = std::make_shared<std::vector<ImageFile>>();
  for (size_t label = 0; label < classes.size(); ++label) {
    const fs::path folder = fs::path(root) / classes[label];
    // An empty extension list takes every file.
    const std::vector<std::string> names =
        sorted_entries(folder, [&](const fs::directory_entry& entry) {
          std::error_code ignored;
          if (!entry.is_regular_file(ignored)) return false;
          if (extensions.empty()) return true;
          const std::string extension = lower(entry.path().extension().string());
          return std::find(extensions.begin(), extensions.end(), extension) != extensions.end();
        });
    for (const std::string& name : names) {
      files->push_back({(folder / name).string(), static_cast<int32_t>(label)});
    }
  }
  return Dataset(std::make_shared<ImageFolderNode>(root, std::move(files)));
}

}  // namespace weft::data
