// JPEG (libjpeg-turbo, through the libjpeg API) and PNG (libpng) decoding and encoding, and the
// decode_image() map function.
//
// Note [Decoder error handling]
// libjpeg and libpng report errors through callbacks that must not return (libjpeg's default
// calls exit()). Ours record the message and longjmp back to a setjmp in a small helper
// function. longjmp skips the frames in between without running destructors, so those frames
// are libjpeg's/libpng's C frames and our callbacks only, and the helpers themselves hold no
// object with a destructor (nor read a local after the jump): every C++ object (the output
// NDArray, row buffers, the encoder's output vector) lives in the calling function, above the
// setjmp, which a jump never crosses. A helper returns false after a jump; its caller destroys
// the codec state (RAII) and throws ValueError naming the input. A callback that must do
// something that may throw (append to a vector) catches inside itself and reports the failure
// as a codec error after the catch block has ended.
//
// Limits: an image of more than kMaxImagePixels pixels is refused after reading its header,
// before the output is allocated; libjpeg's working memory is capped in proportion (progressive
// JPEGs buffer the whole image's coefficients) and so is the number of progressive scans (a
// file of many tiny scans would otherwise take minutes). A JPEG whose data ends before its EOI
// marker is an error, even when only the marker is missing (libjpeg's bit reader reads ahead
// to it), where libjpeg would warn and pad the image with grey (as MXNet's decoder, OpenCV,
// accepts it; TensorFlow's decode_jpeg refuses it too). Other libjpeg warnings (extraneous
// bytes, corrupt markers it can skip) are tolerated as OpenCV tolerates them.
#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include "data/image.h"
#include "data/image_codec_detail.h"

extern "C" {
#include <jerror.h>
#include <jpeglib.h>
#include <png.h>
}

namespace weft::data {
namespace {

constexpr int kMaxJpegScans = 256;

// ---- JPEG ---------------------------------------------------------------------------------------

/// libjpeg's error manager extended with where to jump and the last message.
struct JpegError {
  jpeg_error_mgr mgr;  // first: libjpeg hands callbacks &mgr as cinfo->err
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 64];
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  JpegError* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void jpeg_emit(j_common_ptr cinfo, int level) {
  // Data that ends early is an error (Note [Decoder error handling]); other warnings and trace
  // messages are dropped.
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) jpeg_fail(cinfo);
}

void jpeg_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  const j_decompress_ptr d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxJpegScans) {
    JpegError* err = reinterpret_cast<JpegError*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message), "more than %d progressive scans",
                  kMaxJpegScans);
    std::longjmp(err->jump, 1);
  }
}

void init_jpeg_error(JpegError& err) {
  jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_fail;
  err.mgr.emit_message = jpeg_emit;
  err.message[0] = '\0';
}

struct JpegHeader {
  int64_t width, height;
  J_COLOR_SPACE color_space;
};

// Note [Decoder error handling]: the helpers below hold no objects with destructors.
bool jpeg_read_header_guarded(jpeg_decompress_struct* cinfo, JpegError* err,
                              jpeg_progress_mgr* progress, const uint8_t* data, size_t size,
                              JpegHeader* header) {
  if (setjmp(err->jump)) return false;
  cinfo->err = &err->mgr;
  jpeg_create_decompress(cinfo);
  cinfo->progress = progress;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  *header = {cinfo->image_width, cinfo->image_height, cinfo->jpeg_color_space};
  return true;
}

/// Adobe CMYK (stored inverted) -> RGB, as MXNet's decoder (OpenCV) converts it.
void cmyk_to_rgb(const uint8_t* cmyk, uint8_t* rgb, int64_t width) {
  for (int64_t x = 0; x < width; ++x, cmyk += 4, rgb += 3) {
    const int k = cmyk[3];
    for (int c = 0; c < 3; ++c) rgb[c] = static_cast<uint8_t>(k - ((255 - cmyk[c]) * k >> 8));
  }
}

/// RGB -> grey with libjpeg's weights (0.299, 0.587, 0.114 in 16-bit fixed point).
uint8_t rgb_to_grey(const uint8_t* rgb) {
  return static_cast<uint8_t>((19595 * rgb[0] + 38470 * rgb[1] + 7471 * rgb[2] + 32768) >> 16);
}

/// Decodes every scanline into `out` (height rows of width * channels bytes). CMYK files are
/// read through `cmyk_row` (width * 4 bytes) and converted.
bool jpeg_decode_guarded(jpeg_decompress_struct* cinfo, JpegError* err, uint8_t* out, int channels,
                         bool cmyk, uint8_t* cmyk_row, uint8_t* rgb_row) {
  if (setjmp(err->jump)) return false;
  jpeg_start_decompress(cinfo);
  const int64_t width = cinfo->output_width;
  const int expected = cmyk ? 4 : channels;
  if (cinfo->output_components != expected) {
    std::snprintf(err->message, sizeof(err->message), "decoder gave %d components, expected %d",
                  cinfo->output_components, expected);
    return false;
  }
  while (cinfo->output_scanline < cinfo->output_height) {
    uint8_t* dst = out + static_cast<size_t>(cinfo->output_scanline) * width * channels;
    JSAMPROW row = cmyk ? cmyk_row : dst;
    if (jpeg_read_scanlines(cinfo, &row, 1) != 1) {
      std::snprintf(err->message, sizeof(err->message), "the decoder returned no scanline");
      return false;
    }
    if (!cmyk) continue;
    if (channels == 3) {
      cmyk_to_rgb(cmyk_row, dst, width);
    } else {
      for (int64_t x = 0; x < width; ++x) {
        cmyk_to_rgb(cmyk_row + 4 * x, rgb_row, 1);
        dst[x] = rgb_to_grey(rgb_row);
      }
    }
  }
  // jpeg_finish_decompress is not called: nothing after the last scanline is needed.
  return true;
}

struct JpegDecompressGuard {
  jpeg_decompress_struct* cinfo;
  ~JpegDecompressGuard() { jpeg_destroy_decompress(cinfo); }  // safe on a failed create
};

NDArray decode_jpeg(const uint8_t* data, size_t size, int channels, const std::string& what,
                    int64_t max_pixels) {
  JpegError err;
  init_jpeg_error(err);
  jpeg_progress_mgr progress{};
  progress.progress_monitor = jpeg_progress;
  jpeg_decompress_struct cinfo{};
  JpegDecompressGuard guard{&cinfo};
  JpegHeader header{};
  auto fail = [&](const char* stage) {
    WEFT_THROW(ValueError) << "decode_image: " << what << ": corrupt or unsupported JPEG (" << stage
                           << ": " << err.message << ")";
  };
  if (!jpeg_read_header_guarded(&cinfo, &err, &progress, data, size, &header)) fail("header");
  WEFT_CHECK(header.width * header.height <= max_pixels)
      << "decode_image: " << what << ": a JPEG of " << header.width << " x " << header.height
      << " pixels is larger than the limit of " << max_pixels << " pixels";
  const bool cmyk = header.color_space == JCS_CMYK || header.color_space == JCS_YCCK;
  if (channels == 0) channels = header.color_space == JCS_GRAYSCALE ? 1 : 3;
  cinfo.out_color_space = cmyk ? JCS_CMYK : channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  cinfo.dct_method = JDCT_ISLOW;  // libjpeg's accurate default, as MXNet (OpenCV) decodes
  // Progressive files keep every coefficient (2 bytes a sample) until the last scan.
  cinfo.mem->max_memory_to_use = static_cast<long>(8 * max_pixels + (int64_t{64} << 20));
  NDArray image = NDArray::empty(Shape{header.height, header.width, channels}, DType::kUInt8);
  std::vector<uint8_t> cmyk_row(cmyk ? static_cast<size_t>(header.width) * 4 : 0);
  uint8_t rgb_row[3];
  if (!jpeg_decode_guarded(&cinfo, &err, static_cast<uint8_t*>(image.raw_data()), channels, cmyk,
                           cmyk_row.data(), rgb_row)) {
    fail("data");
  }
  return image;
}

/// libjpeg destination that appends to a vector (Note [Decoder error handling] for its
/// failures).
struct JpegSink {
  jpeg_destination_mgr mgr;  // first: libjpeg hands callbacks &mgr as cinfo->dest
  std::vector<uint8_t>* out;
  JOCTET buffer[16384];
};

void sink_init(j_compress_ptr cinfo) {
  JpegSink* sink = reinterpret_cast<JpegSink*>(cinfo->dest);
  sink->mgr.next_output_byte = sink->buffer;
  sink->mgr.free_in_buffer = sizeof(sink->buffer);
}

void sink_append(j_compress_ptr cinfo, size_t n) {
  JpegSink* sink = reinterpret_cast<JpegSink*>(cinfo->dest);
  bool failed = false;
  try {
    sink->out->insert(sink->out->end(), sink->buffer, sink->buffer + n);
  } catch (...) {
    failed = true;
  }
  if (failed) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 99);
}

boolean sink_empty(j_compress_ptr cinfo) {
  JpegSink* sink = reinterpret_cast<JpegSink*>(cinfo->dest);
  sink_append(cinfo, sizeof(sink->buffer));
  sink_init(cinfo);
  return TRUE;
}

void sink_term(j_compress_ptr cinfo) {
  JpegSink* sink = reinterpret_cast<JpegSink*>(cinfo->dest);
  sink_append(cinfo, sizeof(sink->buffer) - sink->mgr.free_in_buffer);
}

bool jpeg_encode_guarded(jpeg_compress_struct* cinfo, JpegError* err, JpegSink* sink,
                         const uint8_t* pixels, int64_t height, int64_t width, int channels,
                         int quality) {
  if (setjmp(err->jump)) return false;
  cinfo->err = &err->mgr;
  jpeg_create_compress(cinfo);
  sink->mgr.init_destination = sink_init;
  sink->mgr.empty_output_buffer = sink_empty;
  sink->mgr.term_destination = sink_term;
  cinfo->dest = &sink->mgr;
  cinfo->image_width = static_cast<JDIMENSION>(width);
  cinfo->image_height = static_cast<JDIMENSION>(height);
  cinfo->input_components = channels;
  cinfo->in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(cinfo);
  jpeg_set_quality(cinfo, quality, TRUE);
  cinfo->dct_method = JDCT_ISLOW;
  jpeg_start_compress(cinfo, TRUE);
  while (cinfo->next_scanline < cinfo->image_height) {
    JSAMPROW row =
        const_cast<uint8_t*>(pixels) + static_cast<size_t>(cinfo->next_scanline) * width * channels;
    jpeg_write_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_compress(cinfo);
  return true;
}

struct JpegCompressGuard {
  jpeg_compress_struct* cinfo;
  ~JpegCompressGuard() { jpeg_destroy_compress(cinfo); }
};

// ---- PNG ----------------------------------------------------------------------------------------

/// The state libpng's callbacks reach through their error and io pointers.
struct PngState {
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t pos = 0;
  std::vector<uint8_t>* out = nullptr;  // encoding
  char message[256] = {};
};

[[noreturn]] void png_fail(png_structp png, png_const_charp message) {
  PngState* state = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof(state->message), "%s", message);
  png_longjmp(png, 1);
}

void png_warn(png_structp, png_const_charp) {}

void png_read_memory(png_structp png, png_bytep out, size_t n) {
  PngState* state = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > state->size - state->pos) png_error(png, "the data ends early (truncated PNG)");
  std::memcpy(out, state->data + state->pos, n);
  state->pos += n;
}

void png_write_memory(png_structp png, png_bytep data, size_t n) {
  PngState* state = static_cast<PngState*>(png_get_io_ptr(png));
  bool failed = false;
  try {
    state->out->insert(state->out->end(), data, data + n);
  } catch (...) {
    failed = true;
  }
  if (failed) png_error(png, "out of memory");
}

void png_flush_memory(png_structp) {}

struct PngHeader {
  png_uint_32 width, height;
  int bit_depth, color_type;
};

bool png_read_header_guarded(png_structp png, png_infop info, PngState* state, PngHeader* header) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_read_fn(png, state, png_read_memory);
  png_read_info(png, info);
  png_get_IHDR(png, info, &header->width, &header->height, &header->bit_depth, &header->color_type,
               nullptr, nullptr, nullptr);
  return true;
}

/// Sets the transforms that give 8-bit `channels` (1 or 3) without alpha, then reads the rows.
bool png_decode_guarded(png_structp png, png_infop info, PngState* state, const PngHeader& h,
                        int channels, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  const bool color = (h.color_type & PNG_COLOR_MASK_COLOR) != 0;
  if (h.color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);  // tRNS -> alpha
  if (!color && h.bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (h.bit_depth == 16) png_set_strip_16(png);  // the high byte, as MXNet's decoder (OpenCV)
  if ((h.color_type & PNG_COLOR_MASK_ALPHA) != 0 ||
      (h.color_type == PNG_COLOR_TYPE_PALETTE && png_get_valid(png, info, PNG_INFO_tRNS) != 0)) {
    png_set_strip_alpha(png);
  }
  if (channels == 3 && !color) png_set_gray_to_rgb(png);
  if (channels == 1 && color) png_set_rgb_to_gray_fixed(png, 1, 29900, 58700);  // as JPEG's Y
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_channels(png, info) != channels || png_get_bit_depth(png, info) != 8) {
    std::snprintf(state->message, sizeof(state->message),
                  "transforms gave %d channels of %d bits, expected %d of 8",
                  png_get_channels(png, info), png_get_bit_depth(png, info), channels);
    return false;
  }
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  return true;
}

struct PngReadGuard {
  png_structp png;
  png_infop info = nullptr;
  ~PngReadGuard() { png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr); }
};

NDArray decode_png(const uint8_t* data, size_t size, int channels, const std::string& what,
                   int64_t max_pixels) {
  PngState state;
  state.data = data;
  state.size = size;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, png_fail, png_warn);
  WEFT_CHECK_AS(OutOfMemory, png != nullptr) << "decode_image: libpng could not start";
  PngReadGuard guard{png};
  guard.info = png_create_info_struct(png);
  WEFT_CHECK_AS(OutOfMemory, guard.info != nullptr) << "decode_image: libpng could not start";
  auto fail = [&](const char* stage) {
    WEFT_THROW(ValueError) << "decode_image: " << what << ": corrupt or unsupported PNG (" << stage
                           << ": " << state.message << ")";
  };
  PngHeader header{};
  if (!png_read_header_guarded(png, guard.info, &state, &header)) fail("header");
  const int64_t width = header.width, height = header.height;
  WEFT_CHECK(width * height <= max_pixels)
      << "decode_image: " << what << ": a PNG of " << width << " x " << height
      << " pixels is larger than the limit of " << max_pixels << " pixels";
  if (channels == 0) channels = (header.color_type & PNG_COLOR_MASK_COLOR) != 0 ? 3 : 1;
  NDArray image = NDArray::empty(Shape{height, width, channels}, DType::kUInt8);
  uint8_t* pixels = static_cast<uint8_t*>(image.raw_data());
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (int64_t y = 0; y < height; ++y) rows[y] = pixels + y * width * channels;
  if (!png_decode_guarded(png, guard.info, &state, header, channels, rows.data())) fail("data");
  return image;
}

bool png_encode_guarded(png_structp png, png_infop info, PngState* state, png_bytepp rows,
                        int64_t height, int64_t width, int channels) {
  if (setjmp(png_jmpbuf(png))) return false;
  static constexpr int kColorTypes[] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA,
                                        PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
  png_set_write_fn(png, state, png_write_memory, png_flush_memory);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
               kColorTypes[channels], PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, rows);
  png_write_end(png, nullptr);
  return true;
}

struct PngWriteGuard {
  png_structp png;
  png_infop info = nullptr;
  ~PngWriteGuard() { png_destroy_write_struct(&png, info != nullptr ? &info : nullptr); }
};

/// Checks an image to encode: HWC uint8 with one of `allowed` channel counts; waits for it.
void check_encodable(const NDArray& image, const char* fn, std::initializer_list<int> allowed,
                     int64_t max_side) {
  WEFT_CHECK(!image.is_none()) << fn << ": the image is none";
  WEFT_CHECK(image.device().type == DeviceType::kCPU)
      << fn << ": the image must be on the CPU, not " << to_string(image.device());
  WEFT_CHECK(image.ndim() == 3 && image.dtype() == DType::kUInt8)
      << fn << ": expected an HWC uint8 image, got shape " << image.shape() << " "
      << dtype_name(image.dtype());
  const int64_t c = image.shape()[2];
  WEFT_CHECK(std::find(allowed.begin(), allowed.end(), c) != allowed.end())
      << fn << ": an image of " << c << " channels cannot be encoded";
  WEFT_CHECK(image.shape()[0] >= 1 && image.shape()[1] >= 1 && image.shape()[0] <= max_side &&
             image.shape()[1] <= max_side)
      << fn << ": image size " << image.shape()[0] << " x " << image.shape()[1] << " is outside 1.."
      << max_side;
  image.wait_to_read();
}

}  // namespace

namespace detail {

NDArray decode_image_bytes_bounded(const void* data, size_t size, int channels,
                                   const std::string& what, int64_t max_pixels) {
  WEFT_CHECK(channels == 0 || channels == 1 || channels == 3)
      << "decode_image: " << what << ": channels must be 0 (as stored), 1 or 3, got " << channels;
  WEFT_CHECK(data != nullptr || size == 0) << "decode_image: " << what << ": null data";
  const uint8_t* bytes = static_cast<const uint8_t*>(data);
  static constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) {
    return decode_jpeg(bytes, size, channels, what, max_pixels);
  }
  if (size >= 8 && std::memcmp(bytes, kPngSignature, 8) == 0) {
    return decode_png(bytes, size, channels, what, max_pixels);
  }
  char first[40] = "";
  for (size_t i = 0; i < std::min<size_t>(size, 8); ++i) {
    std::snprintf(first + 3 * i, sizeof(first) - 3 * i, "%02x ", bytes[i]);
  }
  WEFT_THROW(ValueError) << "decode_image: " << what << ": " << size
                         << " bytes that are neither JPEG nor PNG (they start with "
                         << (size == 0 ? "nothing" : first) << ")";
}

}  // namespace detail

NDArray decode_image_bytes(const void* data, size_t size, int channels, const std::string& what) {
  return detail::decode_image_bytes_bounded(data, size, channels, what, detail::kMaxImagePixels);
}

std::vector<uint8_t> encode_jpeg(const NDArray& image, int quality) {
  WEFT_CHECK(quality >= 1 && quality <= 100)
      << "encode_jpeg: quality must be in 1..100, got " << quality;
  check_encodable(image, "encode_jpeg", {1, 3}, JPEG_MAX_DIMENSION);
  std::vector<uint8_t> out;
  JpegError err;
  init_jpeg_error(err);
  JpegSink sink{};
  sink.out = &out;
  jpeg_compress_struct cinfo{};
  JpegCompressGuard guard{&cinfo};
  if (!jpeg_encode_guarded(&cinfo, &err, &sink, static_cast<const uint8_t*>(image.raw_data()),
                           image.shape()[0], image.shape()[1], static_cast<int>(image.shape()[2]),
                           quality)) {
    WEFT_THROW(ValueError) << "encode_jpeg: libjpeg failed: " << err.message;
  }
  return out;
}

std::vector<uint8_t> encode_png(const NDArray& image) {
  check_encodable(image, "encode_png", {1, 3, 4}, int64_t{1} << 30);
  std::vector<uint8_t> out;
  PngState state;
  state.out = &out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &state, png_fail, png_warn);
  WEFT_CHECK_AS(OutOfMemory, png != nullptr) << "encode_png: libpng could not start";
  PngWriteGuard guard{png};
  guard.info = png_create_info_struct(png);
  WEFT_CHECK_AS(OutOfMemory, guard.info != nullptr) << "encode_png: libpng could not start";
  const int64_t height = image.shape()[0], width = image.shape()[1];
  const int channels = static_cast<int>(image.shape()[2]);
  uint8_t* pixels = static_cast<uint8_t*>(image.raw_data());
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (int64_t y = 0; y < height; ++y) rows[y] = pixels + y * width * channels;
  if (!png_encode_guarded(png, guard.info, &state, rows.data(), height, width, channels)) {
    WEFT_THROW(ValueError) << "encode_png: libpng failed: " << state.message;
  }
  return out;
}

MapFn decode_image(int channels, int component) {
  WEFT_CHECK(channels == 0 || channels == 1 || channels == 3)
      << "decode_image: channels must be 0 (as stored), 1 or 3, got " << channels;
  WEFT_CHECK(component >= 0) << "decode_image: component must be >= 0, got " << component;
  return [channels, component](std::vector<NDArray> arrays, Rng&) {
    WEFT_CHECK(component < static_cast<int>(arrays.size()))
        << "decode_image: the element has " << arrays.size() << " arrays, no component "
        << component;
    const NDArray& bytes = arrays[component];
    WEFT_CHECK(bytes.dtype() == DType::kUInt8 && bytes.ndim() == 1)
        << "decode_image: component " << component << " must be encoded bytes (uint8 [n]), got "
        << bytes.shape() << " " << dtype_name(bytes.dtype());
    arrays[component] = decode_image_bytes(bytes.raw_data(), bytes.nbytes(), channels,
                                           "component " + std::to_string(component));
    return arrays;
  };
}

}  // namespace weft::data
