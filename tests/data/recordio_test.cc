// MXNet RecordIO: files built here byte by byte from the layout, the writer's exact bytes, round
// trips, corrupt files, and (with WEFT_MXNET_RECORDIO_DIR, run by tests/mxnet/recordio_check.py)
// files exchanged with MXNet 1.9.1.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "data/image.h"
#include "data/recordio_parse.h"
#include "data/sources.h"
#include "tests/data/data_test_util.h"

namespace weft::data {
namespace {

namespace fs = std::filesystem;
using namespace testing;  // NOLINT(google-build-using-namespace)

constexpr uint32_t kMagic = 0xced7230a;
const Bytes kMagicBytes = {0x0a, 0x23, 0xd7, 0xce};  // the magic word, little-endian

void put_u32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

/// One part as the layout defines it: magic, lrecord = cflag << 29 | length, payload, zeros to
/// a multiple of 4.
Bytes part(uint32_t cflag, const Bytes& payload, uint32_t length_field = UINT32_MAX) {
  Bytes out;
  put_u32(out, kMagic);
  const uint32_t length = length_field == UINT32_MAX ? payload.size() : length_field;
  put_u32(out, cflag << 29 | length);
  out.insert(out.end(), payload.begin(), payload.end());
  while (out.size() % 4 != 0) out.push_back(0);
  return out;
}

Bytes bytes_of(const NDArray& a) { return a.to_vector<uint8_t>(); }

/// Expects `it->next()` to throw a DataError for record `record` whose message has every part.
void expect_data_error(Iterator& it, int64_t record, const std::vector<std::string>& parts) {
  try {
    it.next();
    ADD_FAILURE() << "no DataError for record " << record;
  } catch (const DataError& e) {
    EXPECT_EQ(e.index(), record) << e.what();
    for (const std::string& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' is not in: " << e.what();
    }
  }
}

TEST(RecordIOTest, ReadsHandBuiltRecordsOfEveryPaddingInFileOrder) {
  TempDir dir;
  Bytes file;
  std::vector<Bytes> payloads;
  std::vector<size_t> offsets;
  for (uint8_t n = 0; n < 10; ++n) {
    Bytes payload;
    for (uint8_t i = 0; i < n; ++i) payload.push_back(static_cast<uint8_t>(n * 16 + i));
    offsets.push_back(file.size());
    const Bytes framed = part(0, payload);
    file.insert(file.end(), framed.begin(), framed.end());
    payloads.push_back(payload);
  }
  write_file(dir.file("a.rec"), file);
  Dataset ds = recordio(dir.file("a.rec"));
  EXPECT_EQ(ds.cardinality(), kUnknownCardinality);
  const std::vector<Element> elements = drain(ds);
  ASSERT_EQ(elements.size(), payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i) {
    EXPECT_EQ(elements[i].index, static_cast<int64_t>(i));
    ASSERT_EQ(elements[i].arrays.size(), 1u);
    EXPECT_EQ(elements[i].arrays[0].shape(), (Shape{static_cast<int64_t>(payloads[i].size())}));
    EXPECT_EQ(bytes_of(elements[i].arrays[0]), payloads[i]);
    EXPECT_EQ(elements[i].origin, dir.file("a.rec") + " record " + std::to_string(i) + " (byte " +
                                      std::to_string(offsets[i]) + ")");
  }
}

TEST(RecordIOTest, JoinsMultiPartRecordsPuttingTheMagicWordBetweenParts) {
  TempDir dir;
  write_file(dir.file("m.rec"), concat({part(1, text("ABCD")), part(2, {}), part(3, text("xyz")),
                                        part(0, text("q"))}));
  const std::vector<Element> elements = drain(recordio(dir.file("m.rec")));
  ASSERT_EQ(elements.size(), 2u);
  EXPECT_EQ(bytes_of(elements[0].arrays[0]),
            concat({text("ABCD"), kMagicBytes, kMagicBytes, text("xyz")}));
  EXPECT_EQ(bytes_of(elements[1].arrays[0]), text("q"));
  EXPECT_EQ(elements[1].origin, dir.file("m.rec") + " record 1 (byte 32)");
}

TEST(RecordIOTest, WriterSplitsAtAlignedMagicWordsExactlyAsMXNet) {
  TempDir dir;
  // Magic at offset 4 (aligned: split there) and at 10 (unaligned: kept in the data).
  const Bytes first = concat({text("0123"), kMagicBytes, text("45"), kMagicBytes, text("6789AB")});
  // Magic at 0 and 4: an empty first part and an empty middle part.
  const Bytes second = concat({kMagicBytes, kMagicBytes, text("z")});
  {
    RecordIOWriter writer(dir.file("s.rec"));
    writer.write(first.data(), first.size(), 0);
    writer.write(second.data(), second.size(), 1);
  }
  const Bytes expected =
      concat({part(1, text("0123")), part(3, concat({text("45"), kMagicBytes, text("6789AB")})),
              part(1, {}), part(2, {}), part(3, text("z"))});
  EXPECT_EQ(read_file(dir.file("s.rec")), expected);
  const std::vector<Element> elements = drain(recordio(dir.file("s.rec")));
  ASSERT_EQ(elements.size(), 2u);
  EXPECT_EQ(bytes_of(elements[0].arrays[0]), first);
  EXPECT_EQ(bytes_of(elements[1].arrays[0]), second);
}

TEST(RecordIOTest, WriterIndexHasKeyTabOffsetLinesAndBothReadingModesAgree) {
  TempDir dir;
  std::mt19937 gen(7);
  std::vector<Bytes> payloads;
  std::string expected_idx;
  size_t offset = 0;
  {
    RecordIOWriter writer(dir.file("r.rec"), dir.file("r.idx"));
    for (int i = 0; i < 40; ++i) {
      Bytes payload(gen() % 300);
      for (uint8_t& b : payload) b = static_cast<uint8_t>(gen());
      const uint64_t key = 1000 + 3 * i;
      writer.write(payload.data(), payload.size(), key);
      expected_idx += std::to_string(key) + "\t" + std::to_string(offset) + "\n";
      offset += 8 + (payload.size() + 3) / 4 * 4;
      payloads.push_back(std::move(payload));
    }
    writer.close();
  }
  const Bytes idx = read_file(dir.file("r.idx"));
  EXPECT_EQ(std::string(idx.begin(), idx.end()), expected_idx);
  EXPECT_EQ(read_file(dir.file("r.rec")).size(), offset);
  Dataset indexed = recordio(dir.file("r.rec"), {dir.file("r.idx")});
  EXPECT_EQ(indexed.cardinality(), 40);
  const std::vector<Element> a = drain(indexed);
  const std::vector<Element> b = drain(recordio(dir.file("r.rec")));
  ASSERT_EQ(a.size(), 40u);
  ASSERT_EQ(b.size(), 40u);
  for (size_t i = 0; i < 40; ++i) {
    EXPECT_EQ(bytes_of(a[i].arrays[0]), payloads[i]);
    EXPECT_EQ(bytes_of(b[i].arrays[0]), payloads[i]);
    EXPECT_EQ(a[i].origin, b[i].origin);
  }
}

TEST(RecordIOTest, IndexOrderIsTheReadingOrder) {
  TempDir dir;
  write_file(dir.file("o.rec"),
             concat({part(0, text("zero")), part(0, text("one")), part(0, text("two"))}));
  // Offsets 0, 12, 24; reversed, with CRLF line ends and a blank line as Python's strip() allows.
  write_file(dir.file("o.idx"), text("2\t24\r\n\n1\t12\r\n0\t0"));
  const std::vector<Element> elements = drain(recordio(dir.file("o.rec"), {dir.file("o.idx")}));
  ASSERT_EQ(elements.size(), 3u);
  EXPECT_EQ(bytes_of(elements[0].arrays[0]), text("two"));
  EXPECT_EQ(bytes_of(elements[1].arrays[0]), text("one"));
  EXPECT_EQ(bytes_of(elements[2].arrays[0]), text("zero"));
  EXPECT_EQ(elements[0].origin, dir.file("o.rec") + " record 0 (byte 24)");
}

TEST(RecordIOTest, ImageRecordsCarryTheIRHeaderAndTheirLabels) {
  TempDir dir;
  const Bytes image_a = text("JPEGDATA!"), image_b = text("PNG");
  {
    RecordIOWriter writer(dir.file("i.rec"));
    writer.write_image({3.5f}, image_a.data(), image_a.size(), 7);
    writer.write_image({1, 2, -3}, image_b.data(), image_b.size(), 8);
  }
  // The records as MXNet's pack() lays them out: struct 'IfQQ', then the labels when flag > 0.
  auto f32 = [](float v) {
    Bytes out(4);
    std::memcpy(out.data(), &v, 4);
    return out;
  };
  auto u64 = [](uint64_t v) {
    Bytes out;
    put_u32(out, static_cast<uint32_t>(v));
    put_u32(out, static_cast<uint32_t>(v >> 32));
    return out;
  };
  auto u32 = [](uint32_t v) {
    Bytes out;
    put_u32(out, v);
    return out;
  };
  const std::vector<Element> raw = drain(recordio(dir.file("i.rec")));
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(bytes_of(raw[0].arrays[0]), concat({u32(0), f32(3.5f), u64(7), u64(0), image_a}));
  EXPECT_EQ(bytes_of(raw[1].arrays[0]),
            concat({u32(3), f32(0), u64(8), u64(0), f32(1), f32(2), f32(-3), image_b}));
  const std::vector<Element> images = drain(recordio(dir.file("i.rec"), {"", true}));
  ASSERT_EQ(images.size(), 2u);
  ASSERT_EQ(images[0].arrays.size(), 2u);
  EXPECT_EQ(bytes_of(images[0].arrays[0]), image_a);
  EXPECT_EQ(images[0].arrays[1].shape(), (Shape{1}));
  EXPECT_EQ(images[0].arrays[1].to_vector<float>(), std::vector<float>{3.5f});
  EXPECT_EQ(bytes_of(images[1].arrays[0]), image_b);
  EXPECT_EQ(images[1].arrays[1].to_vector<float>(), (std::vector<float>{1, 2, -3}));
  expect_value_error([&] { RecordIOWriter(dir.file("x.rec")).write_image({}, "", 0, 0); },
                     {"label"});
}

TEST(RecordIOTest, BadMagicIsDataErrorNamingRecordAndOffsetAndScanningStopsThere) {
  TempDir dir;
  Bytes bad = part(0, text("two!"));
  bad[0] ^= 0xff;
  write_file(dir.file("b.rec"),
             concat({part(0, text("zero")), part(0, text("one")), bad, part(0, text("three"))}));
  std::unique_ptr<Iterator> it = recordio(dir.file("b.rec")).node()->make_iterator({});
  EXPECT_EQ(bytes_of(it->next()->arrays[0]), text("zero"));
  EXPECT_EQ(bytes_of(it->next()->arrays[0]), text("one"));
  const std::vector<std::string> parts = {dir.file("b.rec"), "record 2", "byte 24", "bad magic",
                                          "0xced723f5"};
  expect_data_error(*it, 2, parts);
  // The framing is lost: the error is delivered once and the iteration ends (a skipping
  // pipeline ends rather than skipping the same error forever).
  EXPECT_FALSE(it->next());
  auto skipping = recordio(dir.file("b.rec")).ignore_errors().iterate();
  int n = 0;
  while (skipping->next()) ++n;
  EXPECT_EQ(n, 2);
  EXPECT_EQ(skipping->stats().skipped_errors, 1);
}

TEST(RecordIOTest, TruncatedRecordsAreDataErrorsWithoutHugeAllocations) {
  TempDir dir;
  // A length that runs past the end of the file (the largest the field can hold).
  write_file(dir.file("long.rec"),
             concat({part(0, text("ok")), part(0, text("abc"), (1u << 29) - 1)}));
  std::unique_ptr<Iterator> it = recordio(dir.file("long.rec")).node()->make_iterator({});
  EXPECT_EQ(bytes_of(it->next()->arrays[0]), text("ok"));
  expect_data_error(*it, 1, {"long.rec", "record 1", "byte 12", "past the end"});
  // A partial part header at the end.
  write_file(dir.file("tail.rec"), concat({part(0, text("ok")), Bytes{0x0a, 0x23, 0xd7}}));
  it = recordio(dir.file("tail.rec")).node()->make_iterator({});
  EXPECT_EQ(bytes_of(it->next()->arrays[0]), text("ok"));
  expect_data_error(*it, 1, {"tail.rec", "record 1", "byte 12", "truncated part header"});
  // A multi-part record whose last part is missing.
  write_file(dir.file("parts.rec"), part(1, text("abcd")));
  it = recordio(dir.file("parts.rec")).node()->make_iterator({});
  expect_data_error(*it, 0, {"record 0", "byte 0", "truncated part header at byte 12"});
  // A record that starts with a continuation part.
  write_file(dir.file("cont.rec"), part(2, text("abcd")));
  it = recordio(dir.file("cont.rec")).node()->make_iterator({});
  expect_data_error(*it, 0, {"record 0", "continuation"});
  // A whole-record flag inside a multi-part record.
  write_file(dir.file("flag.rec"), concat({part(1, text("abcd")), part(0, text("x"))}));
  it = recordio(dir.file("flag.rec")).node()->make_iterator({});
  expect_data_error(*it, 0, {"record 0", "cflag 0"});
}

TEST(RecordIOTest, IndexedReadingContinuesAfterACorruptRecord) {
  TempDir dir;
  write_file(dir.file("c.rec"),
             concat({part(0, text("zero")), part(0, text("one")), part(0, text("two"))}));
  // The second entry points into the middle of record 0's payload.
  write_file(dir.file("c.idx"), text("0\t0\n1\t8\n2\t24\n"));
  std::unique_ptr<Iterator> it =
      recordio(dir.file("c.rec"), {dir.file("c.idx")}).node()->make_iterator({});
  EXPECT_EQ(bytes_of(it->next()->arrays[0]), text("zero"));
  expect_data_error(*it, 1, {"record 1", "byte 8", "bad magic"});
  EXPECT_EQ(bytes_of(it->next()->arrays[0]), text("two"));
  EXPECT_FALSE(it->next().has_value());
}

TEST(RecordIOTest, ShortImageRecordsAreDataErrorsAndTheNextRecordIsRead) {
  TempDir dir;
  Bytes big_flag;
  put_u32(big_flag, 100);  // flag 100: 400 bytes of labels announced
  big_flag.resize(28, 0);
  write_file(dir.file("s.rec"),
             concat({part(0, text("tiny")), part(0, big_flag), part(0, Bytes(24, 0))}));
  std::unique_ptr<Iterator> it = recordio(dir.file("s.rec"), {"", true}).node()->make_iterator({});
  expect_data_error(*it, 0, {"record 0", "IRHeader"});
  expect_data_error(*it, 1, {"record 1", "flag 100"});
  std::optional<Element> last = it->next();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->arrays[0].shape(), (Shape{0}));
  EXPECT_EQ(last->arrays[1].to_vector<float>(), std::vector<float>{0});
}

TEST(RecordIOTest, BadIndexOrMissingFilesAreValueErrorsAtCreation) {
  TempDir dir;
  write_file(dir.file("v.rec"), part(0, text("zero")));
  write_file(dir.file("bad.idx"), text("0\t0\n1 4\n"));
  expect_value_error([&] { recordio(dir.file("v.rec"), {dir.file("bad.idx")}); },
                     {"bad.idx", "line 2"});
  write_file(dir.file("far.idx"), text("0\t0\n1\t12\n"));
  expect_value_error([&] { recordio(dir.file("v.rec"), {dir.file("far.idx")}); },
                     {"far.idx", "entry 1", "past the end"});
  write_file(dir.file("neg.idx"), text("0\t-4\n"));
  expect_value_error([&] { recordio(dir.file("v.rec"), {dir.file("neg.idx")}); },
                     {"neg.idx", "line 1"});
  expect_value_error([&] { recordio(dir.file("v.rec"), {dir.file("none.idx")}); }, {"none.idx"});
  expect_value_error([&] { recordio(dir.file("none.rec")); }, {"none.rec"});
  const char byte = 0;
  expect_value_error([&] { RecordIOWriter(dir.file("w.rec")).write(&byte, size_t{1} << 29, 0); },
                     {"too large"});
}

TEST(RecordIOTest, InMemoryReaderMatchesTheLayout) {
  const Bytes stream = concat({part(0, text("a")), part(1, text("bcde")), part(3, text("f"))});
  const std::vector<Bytes> records =
      detail::read_records_from_memory(stream.data(), stream.size(), "mem");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0], text("a"));
  EXPECT_EQ(records[1], concat({text("bcde"), kMagicBytes, text("f")}));
  Bytes corrupt = stream;
  corrupt[12] = 0;
  EXPECT_THROW(detail::read_records_from_memory(corrupt.data(), corrupt.size(), "mem"), DataError);
}

// ---- the MXNet cross-check (tests/mxnet/recordio_check.py) ------------------------------------
// Phase 1 writes files with weft for MXNet to read; the script checks them with MXNet, writes
// the same records with MXNet and decodes the images with mx.image.imdecode; phase 2 reads
// MXNet's files with weft and compares bytes, records and decoded pixels.

const char* mxnet_dir() { return std::getenv("WEFT_MXNET_RECORDIO_DIR"); }

std::string hex(const Bytes& bytes) {
  std::string out;
  char buf[3];
  for (uint8_t b : bytes) {
    std::snprintf(buf, sizeof(buf), "%02x", b);
    out += buf;
  }
  return out;
}

Bytes unhex(const std::string& s) {
  Bytes out;
  for (size_t i = 0; i + 1 < s.size(); i += 2) {
    out.push_back(static_cast<uint8_t>(std::stoi(s.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> fields;
  std::stringstream ss(line);
  std::string field;
  while (std::getline(ss, field, sep)) fields.push_back(field);
  return fields;
}

/// A smooth synthetic image (JPEG-friendly) of `channels` channels.
NDArray synthetic_image(int64_t h, int64_t w, int channels) {
  std::vector<uint8_t> pixels(h * w * channels);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        pixels[(y * w + x) * channels + c] =
            static_cast<uint8_t>(c == 3 ? 128 + x : (x * (5 + c * 2) + y * (3 + c) + c * 40) % 256);
      }
    }
  }
  return NDArray::from_vector(Shape{h, w, channels}, pixels);
}

TEST(RecordIOMXNet, WeftWritesFilesForMXNet) {
  if (mxnet_dir() == nullptr) GTEST_SKIP() << "set WEFT_MXNET_RECORDIO_DIR (recordio_check.py)";
  const fs::path dir = mxnet_dir();
  std::ofstream tsv(dir / "records.tsv");
  {
    RecordIOWriter writer((dir / "weft.rec").string(), (dir / "weft.idx").string());
    std::vector<Bytes> payloads;
    for (uint8_t n = 0; n < 10; ++n) payloads.push_back(Bytes(n, static_cast<uint8_t>(n + 1)));
    payloads.push_back(concat({text("0123"), kMagicBytes, text("45"), kMagicBytes, text("6789")}));
    payloads.push_back(concat({kMagicBytes, kMagicBytes, text("z")}));
    std::mt19937 gen(11);
    Bytes large(100000);
    for (uint8_t& b : large) b = static_cast<uint8_t>(gen());
    payloads.push_back(large);
    for (size_t i = 0; i < payloads.size(); ++i) {
      const uint64_t key = 100 + 7 * i;
      writer.write(payloads[i].data(), payloads[i].size(), key);
      tsv << "plain\t" << key << "\t" << hex(payloads[i]) << "\n";
    }
  }
  struct Image {
    uint64_t key;
    std::vector<float> labels;
    Bytes bytes;
    std::string kind;
  };
  const std::vector<Image> images = {
      {500, {2}, encode_jpeg(synthetic_image(24, 32, 3), 90), "jpeg"},
      {501, {1.5f, -2, 3}, encode_png(synthetic_image(17, 9, 3)), "png"},
      {502, {0}, encode_png(synthetic_image(8, 8, 1)), "png"},
      {503, {4, 5.25f}, encode_png(synthetic_image(5, 6, 4)), "png"},
      {504, {7}, encode_jpeg(synthetic_image(16, 16, 1), 75), "jpeg"},
  };
  RecordIOWriter writer((dir / "weft_img.rec").string(), (dir / "weft_img.idx").string());
  for (const Image& image : images) {
    writer.write_image(image.labels, image.bytes.data(), image.bytes.size(), image.key);
    tsv << "image\t" << image.key << "\t";
    for (size_t i = 0; i < image.labels.size(); ++i) {
      char label[32];
      std::snprintf(label, sizeof(label), "%.9g", image.labels[i]);
      tsv << (i > 0 ? "," : "") << label;
    }
    tsv << "\t" << hex(image.bytes) << "\t" << image.kind << "\n";
  }
}

TEST(RecordIOMXNet, WeftReadsFilesMXNetWrote) {
  if (mxnet_dir() == nullptr) GTEST_SKIP() << "set WEFT_MXNET_RECORDIO_DIR (recordio_check.py)";
  const fs::path dir = mxnet_dir();
  auto path = [&](const char* name) { return (dir / name).string(); };
  std::vector<Bytes> plain, images;
  std::vector<std::vector<float>> labels;
  std::vector<std::string> kinds;
  std::ifstream tsv(path("records.tsv"));
  ASSERT_TRUE(tsv.good()) << "run WeftWritesFilesForMXNet first";
  for (std::string line; std::getline(tsv, line);) {
    const std::vector<std::string> f = split(line, '\t');
    if (f[0] == "plain") plain.push_back(unhex(f.size() > 2 ? f[2] : ""));
    if (f[0] != "image") continue;
    std::vector<float> l;
    for (const std::string& v : split(f[2], ',')) l.push_back(std::stof(v));
    labels.push_back(l);
    images.push_back(unhex(f[3]));
    kinds.push_back(f[4]);
  }
  // MXNet wrote the same records: the files are byte-identical.
  for (const char* stem : {"", "_img"}) {
    for (const char* ext : {".rec", ".idx"}) {
      const std::string name = std::string(stem) + ext;
      EXPECT_EQ(read_file(path(("mxnet" + name).c_str())), read_file(path(("weft" + name).c_str())))
          << "mxnet" << name << " differs from weft" << name;
    }
  }
  for (const Dataset& ds :
       {recordio(path("mxnet.rec"), {path("mxnet.idx")}), recordio(path("mxnet.rec"))}) {
    const std::vector<Element> elements = drain(ds);
    ASSERT_EQ(elements.size(), plain.size());
    for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(bytes_of(elements[i].arrays[0]), plain[i]);
  }
  const std::vector<Element> elements =
      drain(recordio(path("mxnet_img.rec"), {path("mxnet_img.idx"), true}));
  ASSERT_EQ(elements.size(), images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    EXPECT_EQ(bytes_of(elements[i].arrays[0]), images[i]);
    EXPECT_EQ(elements[i].arrays[1].to_vector<float>(), labels[i]);
  }
  // Decoding: weft against mx.image.imdecode (OpenCV) of the same bytes, as RGB.
  std::ifstream decoded(path("decoded.tsv"));
  int compared = 0;
  for (std::string line; std::getline(decoded, line); ++compared) {
    const std::vector<std::string> f = split(line, '\t');  // index, h, w, c, file
    ASSERT_EQ(f.size(), 5u) << line;
    const size_t i = std::stoul(f[0]);
    const Bytes expected = read_file(path(f[4].c_str()));
    const NDArray ours = decode_image_bytes(images[i].data(), images[i].size(), 3, "mxnet");
    ASSERT_EQ(ours.shape(), (Shape{std::stol(f[1]), std::stol(f[2]), std::stol(f[3])}));
    const Bytes got = bytes_of(ours);
    ASSERT_EQ(got.size(), expected.size());
    int max_diff = 0;
    for (size_t k = 0; k < got.size(); ++k)
      max_diff = std::max(max_diff, std::abs(got[k] - expected[k]));
    std::printf("image %zu (%s): max |weft - MXNet| = %d\n", i, kinds[i].c_str(), max_diff);
    // PNG is lossless; JPEG decoders may differ by a rounding step in colour conversion.
    EXPECT_LE(max_diff, kinds[i] == "png" ? 0 : 2) << "image " << i << " (" << kinds[i] << ")";
  }
  EXPECT_EQ(compared, static_cast<int>(images.size()));
}

}  // namespace
}  // namespace weft::data
