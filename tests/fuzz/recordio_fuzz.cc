// libFuzzer entry point for MXNet RecordIO and the image decoders. The first byte picks the path:
// 0: a RecordIO stream read sequentially (framing, multi-part joins), each record also parsed
// as an image record and written back (the writer's framing must read back to the same
// record); 1: `.idx` text; 2: a channels byte, then JPEG/PNG bytes decoded with a small pixel
// limit. Any input must parse or throw weft::Error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/element.h"
#include "data/image_codec_detail.h"
#include "data/recordio_parse.h"
#include "tests/fuzz/fuzz_runtime.h"

namespace {

namespace detail = weft::data::detail;

// Decoded images stay far below fuzz::kMaxAllocatedBytes (3 bytes a pixel).
constexpr int64_t kMaxPixels = int64_t{1} << 20;

void fuzz_recordio(const uint8_t* data, size_t size) {
  std::vector<std::vector<uint8_t>> records;
  try {
    records = detail::read_records_from_memory(data, size, "fuzz");
  } catch (const weft::data::DataError&) {
    return;
  }
  for (size_t i = 0; i < records.size(); ++i) {
    const std::vector<uint8_t>& record = records[i];
    if (record.size() > size) __builtin_trap();  // a record is never larger than its stream
    try {
      const detail::ImageRecord image =
          detail::parse_image_record(record.data(), record.size(), static_cast<int64_t>(i), "fuzz");
      if (image.image_offset > record.size()) __builtin_trap();
      if (image.labels.size() != (image.flag == 0 ? 1 : image.flag)) __builtin_trap();
    } catch (const weft::data::DataError&) {
    }
    // What the writer frames reads back as the same single record.
    std::vector<uint8_t> framed;
    detail::append_record(framed, record.data(), record.size());
    const std::vector<std::vector<uint8_t>> again =
        detail::read_records_from_memory(framed.data(), framed.size(), "fuzz-rewritten");
    if (again.size() != 1 || again[0] != record) __builtin_trap();
  }
}

void fuzz_index(const uint8_t* data, size_t size) {
  try {
    detail::parse_recordio_index(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const weft::ValueError&) {
  }
}

void fuzz_image(const uint8_t* data, size_t size) {
  if (size == 0) return;
  static constexpr int kChannels[] = {0, 1, 3};
  const int channels = kChannels[data[0] % 3];
  weft::NDArray image;
  try {
    image = detail::decode_image_bytes_bounded(data + 1, size - 1, channels, "fuzz", kMaxPixels);
  } catch (const weft::ValueError&) {
    return;
  }
  const weft::Shape& shape = image.shape();
  if (shape.ndim() != 3 || image.dtype() != weft::DType::kUInt8) __builtin_trap();
  if (shape[0] * shape[1] > kMaxPixels) __builtin_trap();
  if (channels != 0 ? shape[2] != channels : (shape[2] != 1 && shape[2] != 3)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::fuzz::use_sync_runtime();
  return 0;
}

/// A weft::Error of the expected kind is the outcome for bad input; anything else (a crash,
/// another exception, a sanitizer report, a record that does not round-trip) is a finding.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  switch (data[0] % 3) {
    case 0:
      fuzz_recordio(data + 1, size - 1);
      break;
    case 1:
      fuzz_index(data + 1, size - 1);
      break;
    default:
      fuzz_image(data + 1, size - 1);
      break;
  }
  return 0;
}
