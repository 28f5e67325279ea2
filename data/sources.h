// File sources of a Dataset: memory-mapped .npy files and shards, MXNet RecordIO (.rec/.idx),
// and folders of images (one subfolder per class).
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace weft::data {

/// Rows of memory-mapped `.npy` files. Each shard is a tuple of files read side by side (e.g.
/// {"x0.npy", "y0.npy"}): one array per file, and the files of a shard must agree in their
/// first dimension. Shards follow each other in the given order. Element arrays are read-only
/// zero-copy views of the mapping (a map that wants to write copies first). Headers are checked
/// when the dataset is made (ValueError naming the file); origin "x0.npy row 3".
Dataset npy_files(std::vector<std::vector<std::string>> shards);

struct RecordIOOptions {
  /// The index file (`im2rec`'s .idx: "key\toffset" lines). Empty: none; records are read in
  /// file order by scanning, and cardinality is unknown.
  std::string idx_path;
  /// Records are image records (MXNet's IRHeader: flag u32, label f32, id u64, id2 u64, then
  /// `flag` float labels when flag > 0, then the encoded image): elements are (image bytes uint8
  /// [n], label float32 [max(flag, 1)]). Otherwise elements are (record bytes uint8 [n]).
  bool image_records = false;
};
/// The records of an MXNet RecordIO file (the layout is in docs/DATA.md). Multi-part records
/// (cflag 1/2/3) are joined. A corrupt record (bad magic, truncated) is a DataError naming the
/// file, the record and the byte offset.
Dataset recordio(const std::string& rec_path, RecordIOOptions options = {});

/// Writes MXNet RecordIO files (for tests, tools and conversion): records in order, with an
/// index when idx_path is given. Call from one thread.
class RecordIOWriter {
 public:
  explicit RecordIOWriter(const std::string& rec_path, const std::string& idx_path = "");
  ~RecordIOWriter();
  RecordIOWriter(const RecordIOWriter&) = delete;
  RecordIOWriter& operator=(const RecordIOWriter&) = delete;
  /// Appends one record (indexed by `key` when there is an index).
  void write(const void* data, size_t size, uint64_t key);
  /// Appends an image record: IRHeader with `labels` (flag = labels.size() when > 1, else the
  /// single label in the header), then the encoded image bytes.
  void write_image(const std::vector<float>& labels, const void* image, size_t size, uint64_t key);
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct ImageFolderOptions {
  /// File extensions taken (lower case, compared case-insensitively).
  std::vector<std::string> extensions = {".jpg", ".jpeg", ".png"};
};
/// The images under `root`, one subfolder per class (classes sorted by name get labels 0, 1,
/// ...; files sorted by name within each), as (file bytes uint8 [n], label int32 []) — decode
/// them in a parallel map with decode_image(). Origin: the file's path.
Dataset image_folder(const std::string& root, ImageFolderOptions options = {});
/// The class names of image_folder(root), in label order.
std::vector<std::string> image_folder_classes(const std::string& root);

}  // namespace weft::data
