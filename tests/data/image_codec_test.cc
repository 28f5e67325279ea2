// Image codecs: JPEG within JPEG's tolerance, PNG exactly (including PNGs built byte by byte
// here: palette, 16-bit, low bit depths, alpha), grey/colour conversions, corrupt and truncated
// inputs, the pixel limit, and the decode_image() map function.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "data/image.h"
#include "data/image_codec_detail.h"
#include "data/sources.h"
#include "tests/data/data_test_util.h"

namespace weft::data {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)

/// A smooth HWC test image (JPEG compresses such images with small errors).
NDArray synthetic(int64_t h, int64_t w, int channels) {
  Bytes pixels(h * w * channels);
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int c = 0; c < channels; ++c) {
        const double v =
            128 + 100 * std::sin(0.11 * x * (c + 1) + 0.07 * y) * std::cos(0.05 * y * (3 - c % 3));
        pixels[(y * w + x) * channels + c] = static_cast<uint8_t>(std::lround(v));
      }
    }
  }
  return NDArray::from_vector(Shape{h, w, channels}, pixels);
}

/// Random pixels (PNG must reproduce them exactly).
NDArray noise(int64_t h, int64_t w, int channels, unsigned seed) {
  std::mt19937 gen(seed);
  Bytes pixels(h * w * channels);
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(gen());
  return NDArray::from_vector(Shape{h, w, channels}, pixels);
}

Bytes values(const NDArray& a) { return a.to_vector<uint8_t>(); }

NDArray decode(const Bytes& bytes, int channels, const std::string& what = "test image") {
  return decode_image_bytes(bytes.data(), bytes.size(), channels, what);
}

double mean_abs_error(const Bytes& a, const Bytes& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(int(a[i]) - int(b[i]));
  return sum / static_cast<double>(a.size());
}

double psnr(const Bytes& a, const Bytes& b) {
  double sq = 0;
  for (size_t i = 0; i < a.size(); ++i) sq += (int(a[i]) - int(b[i])) * (int(a[i]) - int(b[i]));
  return 10 * std::log10(255.0 * 255.0 / (sq / static_cast<double>(a.size())));
}

// ---- PNG files built by hand (stored deflate blocks, CRC-32 and Adler-32 computed here) -------

uint32_t crc32(const uint8_t* data, size_t n) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= data[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
  }
  return ~crc;
}

void put_be32(Bytes& out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void chunk(Bytes& png, const char* type, const Bytes& data) {
  put_be32(png, static_cast<uint32_t>(data.size()));
  Bytes body(type, type + 4);
  body.insert(body.end(), data.begin(), data.end());
  png.insert(png.end(), body.begin(), body.end());
  put_be32(png, crc32(body.data(), body.size()));
}

/// A zlib stream of stored (uncompressed) blocks.
Bytes zlib_stored(const Bytes& data) {
  Bytes out = {0x78, 0x01};
  size_t at = 0;
  do {
    const size_t n = std::min<size_t>(data.size() - at, 65535);
    out.push_back(at + n == data.size() ? 1 : 0);
    out.push_back(static_cast<uint8_t>(n));
    out.push_back(static_cast<uint8_t>(n >> 8));
    out.push_back(static_cast<uint8_t>(~n));
    out.push_back(static_cast<uint8_t>(~n >> 8));
    out.insert(out.end(), data.begin() + at, data.begin() + at + n);
    at += n;
  } while (at < data.size());
  uint32_t a = 1, b = 0;
  for (uint8_t v : data) {
    a = (a + v) % 65521;
    b = (b + a) % 65521;
  }
  put_be32(out, b << 16 | a);
  return out;
}

/// A PNG of `rows` (each already packed at `depth` bits per sample, without filter bytes).
Bytes make_png(uint32_t w, uint32_t h, int depth, int color_type, const std::vector<Bytes>& rows,
               const Bytes& plte = {}, const Bytes& trns = {}) {
  Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  Bytes ihdr;
  put_be32(ihdr, w);
  put_be32(ihdr, h);
  ihdr.insert(ihdr.end(), {static_cast<uint8_t>(depth), static_cast<uint8_t>(color_type), 0, 0, 0});
  chunk(png, "IHDR", ihdr);
  if (!plte.empty()) chunk(png, "PLTE", plte);
  if (!trns.empty()) chunk(png, "tRNS", trns);
  Bytes raw;
  for (const Bytes& row : rows) {
    raw.push_back(0);  // filter: none
    raw.insert(raw.end(), row.begin(), row.end());
  }
  chunk(png, "IDAT", zlib_stored(raw));
  chunk(png, "IEND", {});
  return png;
}

// ---- tests --------------------------------------------------------------------------------------

TEST(ImageCodecTest, JpegRoundTripIsWithinJpegTolerance) {
  const NDArray image = synthetic(48, 64, 3);
  const Bytes jpeg = encode_jpeg(image, 95);
  ASSERT_GT(jpeg.size(), 4u);
  EXPECT_EQ(jpeg[0], 0xFF);
  EXPECT_EQ(jpeg[1], 0xD8);
  EXPECT_EQ(jpeg[jpeg.size() - 2], 0xFF);
  EXPECT_EQ(jpeg[jpeg.size() - 1], 0xD9);
  const NDArray decoded = decode(jpeg, 3);
  EXPECT_EQ(decoded.shape(), (Shape{48, 64, 3}));
  EXPECT_EQ(decoded.dtype(), DType::kUInt8);
  EXPECT_LT(mean_abs_error(values(decoded), values(image)), 2.5);
  EXPECT_GT(psnr(values(decoded), values(image)), 35.0);
  // As stored: a colour JPEG has three channels.
  EXPECT_EQ(decode(jpeg, 0).shape(), (Shape{48, 64, 3}));
  // Lower quality is smaller and further off, but still close.
  const Bytes rough = encode_jpeg(image, 30);
  EXPECT_LT(rough.size(), jpeg.size());
  EXPECT_GT(psnr(values(decode(rough, 3)), values(image)), 25.0);
}

TEST(ImageCodecTest, GreyJpegDecodesToOneChannelOrThreeEqualOnes) {
  const NDArray grey = synthetic(20, 30, 1);
  const Bytes jpeg = encode_jpeg(grey, 95);
  const NDArray one = decode(jpeg, 0);
  ASSERT_EQ(one.shape(), (Shape{20, 30, 1}));
  EXPECT_LT(mean_abs_error(values(one), values(grey)), 2.0);
  const Bytes three = values(decode(jpeg, 3));
  ASSERT_EQ(three.size(), 20u * 30 * 3);
  const Bytes ones = values(one);
  for (size_t i = 0; i < ones.size(); ++i) {
    ASSERT_EQ(three[3 * i], ones[i]);
    ASSERT_EQ(three[3 * i + 1], ones[i]);
    ASSERT_EQ(three[3 * i + 2], ones[i]);
  }
}

TEST(ImageCodecTest, PngRoundTripIsExactAndAlphaIsDropped) {
  for (int channels : {1, 3, 4}) {
    const NDArray image = noise(13, 7, channels, 100 + channels);
    const Bytes png = encode_png(image);
    const NDArray decoded = decode(png, 0);
    const int expected_channels = channels == 1 ? 1 : 3;
    ASSERT_EQ(decoded.shape(), (Shape{13, 7, expected_channels})) << channels;
    const Bytes in = values(image), out = values(decoded);
    for (size_t p = 0; p < 13 * 7; ++p) {
      for (int c = 0; c < expected_channels; ++c) {
        ASSERT_EQ(out[p * expected_channels + c], in[p * channels + c])
            << "pixel " << p << " channel " << c << " of a " << channels << "-channel PNG";
      }
    }
  }
}

TEST(ImageCodecTest, ColourToGreyUsesLumaWeightsAndGreyToColourRepeats) {
  const NDArray image = noise(9, 11, 3, 5);
  const Bytes rgb = values(image);
  const Bytes grey = values(decode(encode_png(image), 1));
  ASSERT_EQ(grey.size(), 9u * 11);
  for (size_t p = 0; p < grey.size(); ++p) {
    const double luma = 0.299 * rgb[3 * p] + 0.587 * rgb[3 * p + 1] + 0.114 * rgb[3 * p + 2];
    ASSERT_NEAR(grey[p], luma, 1.0) << "pixel " << p;
  }
  const NDArray one = noise(4, 5, 1, 6);
  const Bytes g = values(one), expanded = values(decode(encode_png(one), 3));
  for (size_t p = 0; p < g.size(); ++p) {
    ASSERT_EQ(expanded[3 * p], g[p]);
    ASSERT_EQ(expanded[3 * p + 1], g[p]);
    ASSERT_EQ(expanded[3 * p + 2], g[p]);
  }
}

TEST(ImageCodecTest, HandBuiltPalette16BitLowDepthAndGreyAlphaPngsDecode) {
  // Palette with transparency: indices 0..2 -> colours; alpha is dropped.
  const Bytes plte = {255, 0, 0, 0, 255, 0, 0, 0, 255};
  const Bytes palette = make_png(3, 1, 8, 3, {{2, 0, 1}}, plte, {0, 128});
  EXPECT_EQ(values(decode(palette, 3)), (Bytes{0, 0, 255, 255, 0, 0, 0, 255, 0}));
  EXPECT_EQ(decode(palette, 0).shape(), (Shape{1, 3, 3}));
  // 16-bit RGB: the high byte of each sample.
  const Bytes rgb16 =
      make_png(2, 1, 16, 2, {{0x12, 0x34, 0xAB, 0xCD, 0xFF, 0xFF, 0, 1, 0x80, 0, 0x7F, 0xFF}});
  EXPECT_EQ(values(decode(rgb16, 3)), (Bytes{0x12, 0xAB, 0xFF, 0, 0x80, 0x7F}));
  // 2-bit grey: 0..3 scaled to 0, 85, 170, 255 (the row packs 4 pixels in one byte).
  const Bytes grey2 = make_png(4, 1, 2, 0, {{0b00011011}});
  EXPECT_EQ(values(decode(grey2, 0)), (Bytes{0, 85, 170, 255}));
  // Grey + alpha, 8-bit, to three channels.
  const Bytes grey_alpha = make_png(2, 2, 8, 4, {{10, 255, 20, 0}, {30, 7, 40, 9}});
  EXPECT_EQ(values(decode(grey_alpha, 3)), (Bytes{10, 10, 10, 20, 20, 20, 30, 30, 30, 40, 40, 40}));
  // 16-bit grey to one channel.
  const Bytes grey16 = make_png(1, 2, 16, 0, {{0xAA, 0x01}, {0x01, 0xFF}});
  EXPECT_EQ(values(decode(grey16, 1)), (Bytes{0xAA, 0x01}));
}

TEST(ImageCodecTest, CorruptBytesAreValueErrorsNamingWhat) {
  std::mt19937 gen(3);
  Bytes random(200);
  for (uint8_t& b : random) b = static_cast<uint8_t>(gen());
  expect_value_error([&] { decode(random, 3, "img-17"); }, {"img-17", "neither JPEG nor PNG"});
  expect_value_error([&] { decode({}, 3, "empty-one"); }, {"empty-one"});
  Bytes fake_jpeg = {0xFF, 0xD8, 0xFF};
  fake_jpeg.insert(fake_jpeg.end(), random.begin(), random.end());
  expect_value_error([&] { decode(fake_jpeg, 3, "fake.jpg"); }, {"fake.jpg", "JPEG"});
  Bytes png = encode_png(noise(4, 4, 3, 1));
  Bytes bad_crc = png;
  bad_crc[29] ^= 0x55;  // inside the IHDR chunk's CRC (bytes 29..32)
  expect_value_error([&] { decode(bad_crc, 3, "crc.png"); }, {"crc.png", "PNG"});
  Bytes garbage_png(png.begin(), png.begin() + 8);
  garbage_png.insert(garbage_png.end(), random.begin(), random.end());
  expect_value_error([&] { decode(garbage_png, 3, "junk.png"); }, {"junk.png", "PNG"});
  expect_value_error([&] { decode(png, 2, "two"); }, {"channels"});
  // Every strictly shorter prefix of a JPEG fails cleanly (header or data error), never aborts.
  const Bytes jpeg = encode_jpeg(synthetic(16, 16, 3), 80);
  for (size_t n = 0; n + 2 < jpeg.size(); n += 7) {
    const Bytes prefix(jpeg.begin(), jpeg.begin() + n);
    EXPECT_THROW(decode(prefix, 3), ValueError) << n << " of " << jpeg.size() << " bytes";
  }
}

TEST(ImageCodecTest, TruncatedJpegAndPngAreValueErrors) {
  const Bytes jpeg = encode_jpeg(synthetic(64, 64, 3), 90);
  const Bytes half(jpeg.begin(), jpeg.begin() + jpeg.size() / 2);
  expect_value_error([&] { decode(half, 3, "half.jpg"); }, {"half.jpg", "JPEG"});
  // Even a file that lacks only its EOI marker is truncated (libjpeg reads past the last
  // entropy-coded byte looking for it).
  const Bytes no_eoi(jpeg.begin(), jpeg.end() - 2);
  expect_value_error([&] { decode(no_eoi, 3, "no_eoi.jpg"); }, {"no_eoi.jpg", "Premature end"});
  const Bytes png = encode_png(noise(16, 16, 3, 2));
  const Bytes cut(png.begin(), png.begin() + png.size() - 20);
  expect_value_error([&] { decode(cut, 3, "cut.png"); }, {"cut.png", "PNG"});
}

TEST(ImageCodecTest, ImagesAboveThePixelLimitAreRefusedBeforeDecoding) {
  // A PNG header announcing 100000 x 100000 pixels (no image data follows).
  const Bytes huge_png = make_png(100000, 100000, 8, 2, {});
  expect_value_error([&] { decode(huge_png, 3, "bomb.png"); },
                     {"bomb.png", "100000 x 100000", "limit"});
  // A JPEG header (SOF0 + SOS) announcing 60000 x 60000 pixels.
  const Bytes huge_jpeg = {0xFF, 0xD8, 0xFF, 0xC0, 0,    17, 8, 0xEA, 0x60, 0xEA, 0x60, 3,
                           1,    0x11, 0,    2,    0x11, 0,  3, 0x11, 0,    0xFF, 0xDA, 0,
                           12,   3,    1,    0,    2,    0,  3, 0,    0,    63,   0};
  expect_value_error([&] { decode(huge_jpeg, 3, "bomb.jpg"); },
                     {"bomb.jpg", "60000 x 60000", "limit"});
  // The bounded decoder with a small limit refuses an ordinary image.
  const Bytes png = encode_png(noise(20, 20, 3, 9));
  expect_value_error(
      [&] { detail::decode_image_bytes_bounded(png.data(), png.size(), 3, "small", 399); },
      {"small", "20 x 20", "399"});
  EXPECT_EQ(detail::decode_image_bytes_bounded(png.data(), png.size(), 3, "ok", 400).shape(),
            (Shape{20, 20, 3}));
}

TEST(ImageCodecTest, EncodersRejectWhatTheyCannotEncode) {
  expect_value_error([&] { encode_jpeg(noise(4, 4, 4, 1)); }, {"encode_jpeg", "4 channels"});
  expect_value_error([&] { encode_jpeg(noise(4, 4, 3, 1), 0); }, {"quality"});
  expect_value_error(
      [&] {
        encode_png(NDArray::zeros(Shape{4, 4, 3}, DType::kFloat32));
      },
      {"encode_png", "uint8"});
  expect_value_error([&] { encode_png(noise(4, 4, 2, 1)); }, {"encode_png", "2 channels"});
}

TEST(ImageCodecTest, DecodeImageMapFnDecodesTheChosenComponentOfRecordIOElements) {
  // Image bytes as recordio() hands them out: a view into the record after its header.
  const std::string dir = std::filesystem::temp_directory_path() / "weft_codec_XXXXXX";
  std::string pattern = dir;
  const std::string tmp = ::mkdtemp(pattern.data());
  const NDArray image = noise(6, 5, 3, 4);
  const Bytes png = encode_png(image);
  {
    RecordIOWriter writer(tmp + "/img.rec");
    writer.write_image({9}, png.data(), png.size(), 0);
  }
  std::unique_ptr<Iterator> it = recordio(tmp + "/img.rec", {"", true}).node()->make_iterator({});
  std::optional<Element> element = it->next();
  ASSERT_TRUE(element.has_value());
  Rng rng(1, 2);
  std::vector<NDArray> out = decode_image(3, 0)(element->arrays, rng);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(values(out[0]), values(image));
  EXPECT_EQ(out[1].to_vector<float>(), std::vector<float>{9});
  // Component 1 is the float label: not encoded bytes.
  expect_value_error([&] { decode_image(3, 1)(element->arrays, rng); }, {"uint8"});
  expect_value_error([&] { decode_image(3, 2)(element->arrays, rng); }, {"component 2"});
  expect_value_error([&] { decode_image(2); }, {"channels"});
  std::filesystem::remove_all(tmp);
}

TEST(ImageCodecTest, ImageFolderThroughAParallelDecodeMapNamesTheCorruptFile) {
  std::string pattern = (std::filesystem::temp_directory_path() / "weft_codec_XXXXXX").string();
  const std::string root = ::mkdtemp(pattern.data());
  std::filesystem::create_directory(root + "/cats");
  std::filesystem::create_directory(root + "/dogs");
  const NDArray a = noise(4, 3, 3, 11), b = noise(2, 5, 3, 12);
  auto write = [](const std::string& path, const Bytes& bytes) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  };
  write(root + "/cats/a.png", encode_png(a));
  write(root + "/cats/b.jpg", {0xFF, 0xD8, 0xFF, 0x00, 0x01});  // corrupt
  write(root + "/dogs/c.png", encode_png(b));
  MapOptions options;
  options.num_parallel = 2;
  options.name = "decode_image";
  std::unique_ptr<Iterator> it = image_folder(root).map(decode_image(3), options).iterate();
  std::optional<Element> first = it->next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(values(first->arrays[0]), values(a));
  EXPECT_EQ(first->arrays[1].to_vector<int32_t>(), std::vector<int32_t>{0});
  try {
    it->next();
    ADD_FAILURE() << "no DataError for the corrupt file";
  } catch (const DataError& e) {
    EXPECT_EQ(e.origin(), root + "/cats/b.jpg");
    EXPECT_NE(std::string(e.what()).find(root + "/cats/b.jpg"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("JPEG"), std::string::npos) << e.what();
  }
  std::optional<Element> third = it->next();
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(values(third->arrays[0]), values(b));
  EXPECT_EQ(third->arrays[1].to_vector<int32_t>(), std::vector<int32_t>{1});
  EXPECT_FALSE(it->next().has_value());
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace weft::data
