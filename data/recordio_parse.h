// The byte-level parts of MXNet RecordIO behind recordio(): record framing, image record headers
// and .idx lines, over any byte source (a file through pread, or memory for the fuzz target).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace weft::data::detail {

/// The magic word that starts every RecordIO part (little-endian u32).
inline constexpr uint32_t kRecordIOMagic = 0xced7230a;
/// The largest part length the 29-bit length field can hold.
inline constexpr uint32_t kRecordIOMaxPartLength = (uint32_t{1} << 29) - 1;
/// Bytes of MXNet's IRHeader {u32 flag; f32 label; u64 id; u64 id2}.
inline constexpr size_t kIRHeaderSize = 24;

/// Reads `n` bytes at `offset` into `dst`, all of them or throws. Called only for ranges the
/// caller has checked to lie within the source's size.
using ReadAt = std::function<void(uint64_t offset, void* dst, size_t n)>;

/// "train.rec record 17 (byte 40960)": how elements and errors name a record.
std::string record_origin(const std::string& name, int64_t record, uint64_t offset);

/// Where a record lies: it starts at `offset`, has `parts` parts, joins to `size` bytes (the
/// parts' payloads with the magic word re-inserted between consecutive parts, as MXNet's reader
/// does) and the next record starts at `end`.
struct RecordLayout {
  uint64_t offset = 0;
  uint64_t parts = 0;
  uint64_t size = 0;
  uint64_t end = 0;
};

/// Locates the record that starts at `offset` in a RecordIO stream of `file_size` bytes,
/// reading only part headers. Throws DataError naming `name`, record number `record` and the
/// offset of the bad part for a truncated header, a bad magic, an impossible continuation flag,
/// or a part that runs past the end. Never allocates. Thread-safe if `read` is.
RecordLayout locate_record(const ReadAt& read, uint64_t file_size, uint64_t offset, int64_t record,
                           const std::string& name);

/// Copies the joined record described by `layout` (from locate_record on the same bytes) to
/// `dst`, which holds layout.size bytes; throws DataError if the parts no longer match the
/// layout (the file changed in between). Thread-safe if `read` is.
void read_record(const ReadAt& read, const RecordLayout& layout, int64_t record,
                 const std::string& name, uint8_t* dst);

/// Appends one record to `out` in MXNet's framing, split into parts exactly where MXNet's
/// writer splits them (at every 4-aligned occurrence of the magic word), zero-padded to 4 bytes.
/// Throws ValueError when `size` does not fit the 29-bit length field. Thread-safe.
void append_record(std::vector<uint8_t>& out, const void* data, size_t size);

/// The fields of an image record (MXNet's IRHeader and the labels after it).
struct ImageRecord {
  uint32_t flag = 0;
  uint64_t id = 0;
  uint64_t id2 = 0;
  /// max(flag, 1) labels: the header's label when flag is 0, else the `flag` floats after it.
  std::vector<float> labels;
  /// Offset of the encoded image within the record.
  size_t image_offset = 0;
};

/// Parses the header of an image record of `size` bytes; throws DataError naming `origin`
/// (record index `record`) when the record is too short for its header and labels.
/// Thread-safe.
ImageRecord parse_image_record(const uint8_t* data, size_t size, int64_t record,
                               const std::string& origin);

/// The record offsets of an `.idx` file's text ("key\toffset" lines, in file order). Throws
/// ValueError naming `what` and the line for a malformed line. Thread-safe.
std::vector<uint64_t> parse_recordio_index(const std::string& text, const std::string& what);

/// Every record of the RecordIO stream in `size` bytes at `data`, read sequentially like
/// recordio() without an index (the fuzz target's entry point). Throws DataError like the
/// reader. Thread-safe.
std::vector<std::vector<uint8_t>> read_records_from_memory(const void* data, size_t size,
                                                           const std::string& what);

}  // namespace weft::data::detail
