// Tests for .params and .npy reading/writing against files built byte by byte from FORMATS.md.
#include "ndarray/serialize.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/error.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

/// Builds a little-endian byte string by hand (independent of the code under test).
class Bytes {
 public:
  Bytes& u8(uint8_t v) { return put(v, 1); }
  Bytes& u16(uint16_t v) { return put(v, 2); }
  Bytes& u32(uint32_t v) { return put(v, 4); }
  Bytes& i32(int32_t v) { return put(static_cast<uint32_t>(v), 4); }
  Bytes& u64(uint64_t v) { return put(v, 8); }
  Bytes& i64(int64_t v) { return put(static_cast<uint64_t>(v), 8); }
  Bytes& f32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return u32(bits);
  }
  Bytes& f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    return u64(bits);
  }
  Bytes& text(const std::string& s) {
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  /// A .params string: u64 length + bytes.
  Bytes& str(const std::string& s) { return u64(s.size()).text(s); }
  /// A V2/V3/V1 shape: i32 ndim + i64 dims.
  Bytes& shape(std::initializer_list<int64_t> dims) {
    i32(static_cast<int32_t>(dims.size()));
    for (int64_t d : dims) i64(d);
    return *this;
  }
  Bytes& append(const Bytes& other) {
    data.insert(data.end(), other.data.begin(), other.data.end());
    return *this;
  }
  std::vector<uint8_t> data;

 private:
  Bytes& put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) data.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
};

constexpr uint32_t kV1 = 0xF993FAC8, kV2 = 0xF993FAC9, kV3 = 0xF993FACA;

template <typename T>
std::vector<T> values_of(const std::vector<uint8_t>& bytes) {
  EXPECT_EQ(bytes.size() % sizeof(T), 0u);
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

template <typename T>
std::vector<uint8_t> bytes_of(std::initializer_list<T> values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

HostArray dense(Shape shape, DType dtype, std::vector<uint8_t> bytes) {
  HostArray a;
  a.shape = std::move(shape);
  a.dtype = dtype;
  a.bytes = std::move(bytes);
  return a;
}

/// A pattern of `n` bytes that differs per position and per seed.
std::vector<uint8_t> pattern(size_t n, int seed) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(i * 37 + seed * 11 + 1);
  return out;
}

constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kUInt8,
                                DType::kInt32,   DType::kInt8,    DType::kInt64,   DType::kBool,
                                DType::kInt16,   DType::kUInt16,  DType::kUInt32,  DType::kUInt64,
                                DType::kBFloat16};

size_t element_size(DType t) {  // independent of dtype_size(): sizes from FORMATS.md's flag list
  switch (t) {
    case DType::kFloat64:
    case DType::kInt64:
    case DType::kUInt64:
      return 8;
    case DType::kFloat32:
    case DType::kInt32:
    case DType::kUInt32:
      return 4;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
    case DType::kUInt16:
      return 2;
    default:
      return 1;
  }
}

/// A scratch directory removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("weft_serialize_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

/// Returns the ValueError message `fn` throws (fails the test when it throws nothing).
template <typename Fn>
std::string value_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const ValueError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ValueError, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected ValueError, nothing was thrown";
  return "";
}

// ---- the hand-written .params file ------------------------------------------------------------

Bytes csr_record(int32_t device_type) {  // [[0, 5, 0], [7, 0, 9]] as csr
  Bytes b;
  b.u32(kV2).i32(2).shape({3}).shape({2, 3}).i32(device_type).i32(0).i32(0);
  b.i32(6).shape({3});  // indptr: int64 (3,)
  b.i32(6).shape({3});  // indices: int64 (3,)
  b.f32(5).f32(7).f32(9);
  b.i64(0).i64(1).i64(3);
  b.i64(1).i64(0).i64(2);
  return b;
}

Bytes row_sparse_record(int32_t device_type) {  // (4, 2) with rows 1 and 3 stored
  Bytes b;
  b.u32(kV2).i32(1).shape({2, 2}).shape({4, 2}).i32(device_type).i32(0).i32(0);
  b.i32(6).shape({2});  // indices: int64 (2,)
  b.f32(1).f32(2).f32(3).f32(4);
  b.i64(1).i64(3);
  return b;
}

/// A V2 dict file with one record of each kind, written from FORMATS.md.
std::vector<uint8_t> hand_written_params() {
  Bytes b;
  b.u64(0x112).u64(0).u64(7);
  // 0: V2 dense float32 (2, 2) on gpu(1).
  b.u32(kV2).i32(0).shape({2, 2}).i32(2).i32(1).i32(0).f32(1).f32(2).f32(3).f32(4);
  // 1: V1 int32 (3,) on cpu(0).
  b.u32(kV1).shape({3}).i32(1).i32(0).i32(4).i32(-1).i32(0).i32(7);
  // 2: legacy, no magic: u32 ndim 2, u32 dims (2, 3), uint8 on cpu(0).
  b.u32(2).u32(2).u32(3).i32(1).i32(0).i32(3);
  for (int i = 1; i <= 6; ++i) b.u8(static_cast<uint8_t>(i));
  // 3: V3 float64 0-d scalar on cpu_pinned(0).
  b.u32(kV3).i32(0).shape({}).i32(3).i32(0).i32(1).f64(2.5);
  // 4: V2 none array (ndim 0).
  b.u32(kV2).i32(0).i32(0);
  // 5: csr on cpu(0); 6: row_sparse on cpu_shared(0).
  b.append(csr_record(1)).append(row_sparse_record(5));
  b.u64(7);
  for (const char* name : {"arg:fc_weight", "arg:counts", "aux:bn_moving_mean", "aux:scalar",
                           "arg:none", "arg:csr", "arg:rsp"}) {
    b.str(name);
  }
  return b.data;
}

TEST(SerializeParams, ReadsHandWrittenFileOfEveryRecordKind) {
  const std::vector<uint8_t> file = hand_written_params();
  const NamedArrays got = load_params_from_memory(file.data(), file.size(), "hand.params");
  ASSERT_EQ(got.arrays.size(), 7u);
  EXPECT_EQ(got.names,
            (std::vector<std::string>{"arg:fc_weight", "arg:counts", "aux:bn_moving_mean",
                                      "aux:scalar", "arg:none", "arg:csr", "arg:rsp"}));

  const HostArray& v2 = got.arrays[0];
  EXPECT_EQ(v2.shape, (Shape{2, 2}));
  EXPECT_EQ(v2.dtype, DType::kFloat32);
  EXPECT_EQ(v2.device, Device::cuda(1));
  EXPECT_EQ(v2.storage_type, 0);
  EXPECT_EQ(values_of<float>(v2.bytes), (std::vector<float>{1, 2, 3, 4}));

  const HostArray& v1 = got.arrays[1];
  EXPECT_EQ(v1.shape, (Shape{3}));
  EXPECT_EQ(v1.dtype, DType::kInt32);
  EXPECT_EQ(v1.device, Device::cpu());
  EXPECT_EQ(values_of<int32_t>(v1.bytes), (std::vector<int32_t>{-1, 0, 7}));

  const HostArray& legacy = got.arrays[2];
  EXPECT_EQ(legacy.shape, (Shape{2, 3}));
  EXPECT_EQ(legacy.dtype, DType::kUInt8);
  EXPECT_EQ(legacy.bytes, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));

  const HostArray& scalar = got.arrays[3];
  EXPECT_EQ(scalar.shape.ndim(), 0);
  EXPECT_EQ(scalar.dtype, DType::kFloat64);
  EXPECT_EQ(scalar.device.type, DeviceType::kCUDAHost);
  EXPECT_EQ(values_of<double>(scalar.bytes), (std::vector<double>{2.5}));

  const HostArray& none = got.arrays[4];
  EXPECT_EQ(none.shape.ndim(), -1);
  EXPECT_EQ(none.dtype, DType::kUnknown);
  EXPECT_TRUE(none.bytes.empty());

  const HostArray& csr = got.arrays[5];
  EXPECT_EQ(csr.storage_type, 2);
  EXPECT_EQ(csr.shape, (Shape{2, 3}));
  EXPECT_EQ(csr.storage_shape, (Shape{3}));
  EXPECT_EQ(csr.dtype, DType::kFloat32);
  EXPECT_EQ(values_of<float>(csr.bytes), (std::vector<float>{5, 7, 9}));
  ASSERT_EQ(csr.aux_meta.size(), 2u);
  ASSERT_EQ(csr.aux_bytes.size(), 2u);
  EXPECT_EQ(csr.aux_meta[0].first, DType::kInt64);
  EXPECT_EQ(csr.aux_meta[0].second, (Shape{3}));
  EXPECT_EQ(values_of<int64_t>(csr.aux_bytes[0]), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(values_of<int64_t>(csr.aux_bytes[1]), (std::vector<int64_t>{1, 0, 2}));

  const HostArray& rsp = got.arrays[6];
  EXPECT_EQ(rsp.storage_type, 1);
  EXPECT_EQ(rsp.shape, (Shape{4, 2}));
  EXPECT_EQ(rsp.storage_shape, (Shape{2, 2}));
  EXPECT_EQ(rsp.device, Device::cpu());  // cpu_shared reads as cpu
  EXPECT_EQ(values_of<float>(rsp.bytes), (std::vector<float>{1, 2, 3, 4}));
  ASSERT_EQ(rsp.aux_meta.size(), 1u);
  EXPECT_EQ(rsp.aux_meta[0].second, (Shape{2}));
  EXPECT_EQ(values_of<int64_t>(rsp.aux_bytes[0]), (std::vector<int64_t>{1, 3}));
}

TEST(SerializeParams, ReadsUnknownShapeV3RecordAsNone) {
  Bytes b;
  b.u64(0x112).u64(0).u64(2);
  b.u32(kV3).i32(0).i32(-1);                             // none
  b.u32(kV3).i32(0).shape({0, 2}).i32(1).i32(0).i32(0);  // zero-size, no data
  b.u64(0);
  const NamedArrays got = load_params_from_memory(b.data.data(), b.data.size(), "v3");
  ASSERT_EQ(got.arrays.size(), 2u);
  EXPECT_TRUE(got.names.empty());
  EXPECT_EQ(got.arrays[0].shape.ndim(), -1);
  EXPECT_EQ(got.arrays[1].shape, (Shape{0, 2}));
  EXPECT_TRUE(got.arrays[1].bytes.empty());
}

TEST(SerializeParams, SplitParamNameSeparatesCheckpointPrefixes) {
  EXPECT_EQ(split_param_name("arg:fc1_weight"),
            std::make_pair(std::string("arg"), std::string("fc1_weight")));
  EXPECT_EQ(split_param_name("aux:bn_moving_var"),
            std::make_pair(std::string("aux"), std::string("bn_moving_var")));
  EXPECT_EQ(split_param_name("dense0.weight"),
            std::make_pair(std::string(""), std::string("dense0.weight")));
  EXPECT_EQ(split_param_name("argx:w"), std::make_pair(std::string(""), std::string("argx:w")));
  EXPECT_EQ(split_param_name("arg:"), std::make_pair(std::string("arg"), std::string("")));
}

// ---- writing ------------------------------------------------------------------------------------

TEST(SerializeParams, SavesV2DictBytesExactlyAsFormatsDescribes) {
  NamedArrays in;
  in.names = {"arg:w", "aux:m"};
  in.arrays.push_back(dense(Shape{2}, DType::kFloat32, bytes_of<float>({1.5f, -2})));
  in.arrays.push_back(dense(Shape{1, 1}, DType::kInt64, bytes_of<int64_t>({42})));
  in.arrays[1].device = Device::cuda(3);  // saving always records cpu(0)
  Bytes want;
  want.u64(0x112).u64(0).u64(2);
  want.u32(kV2).i32(0).shape({2}).i32(1).i32(0).i32(0).f32(1.5f).f32(-2);
  want.u32(kV2).i32(0).shape({1, 1}).i32(1).i32(0).i32(6).i64(42);
  want.u64(2).str("arg:w").str("aux:m");
  EXPECT_EQ(save_params_to_memory(in), want.data);
}

TEST(SerializeParams, SavesV3ListBytesWithScalarAndNone) {
  NamedArrays in;
  in.arrays.push_back(
      dense(Shape(std::vector<int64_t>{}), DType::kFloat64, bytes_of<double>({0.25})));
  in.arrays.push_back(HostArray{});
  Bytes want;
  want.u64(0x112).u64(0).u64(2);
  want.u32(kV3).i32(0).shape({}).i32(1).i32(0).i32(1).f64(0.25);
  want.u32(kV3).i32(0).i32(-1);
  want.u64(0);
  EXPECT_EQ(save_params_to_memory(in, /*v3=*/true), want.data);
}

TEST(SerializeParams, SavesV2NoneAsNdimZero) {
  NamedArrays in;
  in.arrays.push_back(HostArray{});
  Bytes want;
  want.u64(0x112).u64(0).u64(1).u32(kV2).i32(0).i32(0).u64(0);
  EXPECT_EQ(save_params_to_memory(in), want.data);
}

TEST(SerializeParams, SavesSparseRecordsBytesExactly) {
  Bytes file;
  file.u64(0x112).u64(0).u64(2).append(csr_record(1)).append(row_sparse_record(1)).u64(0);
  const NamedArrays loaded = load_params_from_memory(file.data.data(), file.data.size(), "sp");
  EXPECT_EQ(save_params_to_memory(loaded), file.data);
}

TEST(SerializeParams, RoundTripsEveryDtypeInV2AndV3) {
  for (bool v3 : {false, true}) {
    NamedArrays in;
    int seed = 0;
    for (DType t : kAllDTypes) {
      in.names.push_back(std::string("arg:") + dtype_name(t));
      in.arrays.push_back(dense(Shape{2, 3}, t, pattern(6 * element_size(t), seed++)));
    }
    const std::vector<uint8_t> file = save_params_to_memory(in, v3);
    const NamedArrays out = load_params_from_memory(file.data(), file.size(), "rt");
    ASSERT_EQ(out.arrays.size(), in.arrays.size());
    EXPECT_EQ(out.names, in.names);
    for (size_t i = 0; i < in.arrays.size(); ++i) {
      SCOPED_TRACE(dtype_name(in.arrays[i].dtype));
      EXPECT_EQ(out.arrays[i].shape, in.arrays[i].shape);
      EXPECT_EQ(out.arrays[i].dtype, in.arrays[i].dtype);
      EXPECT_EQ(out.arrays[i].bytes, in.arrays[i].bytes);
      EXPECT_EQ(out.arrays[i].device, Device::cpu());
      EXPECT_EQ(out.arrays[i].storage_type, 0);
    }
  }
}

TEST(SerializeParams, RoundTripsListAndDictThroughFiles) {
  ScratchDir dir;
  NamedArrays list;
  list.arrays.push_back(dense(Shape{3}, DType::kInt32, bytes_of<int32_t>({1, 2, 3})));
  list.arrays.push_back(dense(Shape{1}, DType::kUInt8, {9}));
  save_params(dir.file("list.params"), list);
  const NamedArrays list_back = load_params(dir.file("list.params"));
  EXPECT_TRUE(list_back.names.empty());
  ASSERT_EQ(list_back.arrays.size(), 2u);
  EXPECT_EQ(values_of<int32_t>(list_back.arrays[0].bytes), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(list_back.arrays[1].bytes, (std::vector<uint8_t>{9}));

  NamedArrays dict = list;
  dict.names = {"arg:a", "b"};
  save_params(dir.file("dict.params"), dict, /*v3=*/true);
  const NamedArrays dict_back = load_params(dir.file("dict.params"));
  EXPECT_EQ(dict_back.names, dict.names);
  EXPECT_EQ(dict_back.arrays[0].shape, (Shape{3}));

  NamedArrays empty;
  save_params(dir.file("empty.params"), empty);
  EXPECT_TRUE(load_params(dir.file("empty.params")).arrays.empty());
}

TEST(SerializeParams, SaveRejectsInconsistentArraysWithoutTouchingTheFile) {
  ScratchDir dir;
  const std::string path = dir.file("keep.params");
  write_bytes(path, {1, 2, 3});

  NamedArrays bad_size;
  bad_size.arrays.push_back(dense(Shape{2, 2}, DType::kFloat32, std::vector<uint8_t>(12)));
  EXPECT_NE(value_error_of([&] { save_params(path, bad_size); }).find("needs 16 bytes"),
            std::string::npos);

  NamedArrays bad_names;
  bad_names.names = {"a", "b"};
  bad_names.arrays.push_back(dense(Shape{1}, DType::kUInt8, {1}));
  value_error_of([&] { save_params(path, bad_names); });

  NamedArrays unknown;
  unknown.arrays.push_back(dense(Shape{1}, DType::kUnknown, {1}));
  value_error_of([&] { save_params(path, unknown); });

  NamedArrays scalar;
  scalar.arrays.push_back(dense(Shape(std::vector<int64_t>{}), DType::kUInt8, {1}));
  EXPECT_NE(value_error_of([&] { save_params(path, scalar); }).find("v3=true"), std::string::npos);

  NamedArrays unknown_dim;
  unknown_dim.arrays.push_back(dense(Shape{-1, 2}, DType::kUInt8, {}));
  value_error_of([&] { save_params(path, unknown_dim); });

  Bytes csr_file;
  csr_file.u64(0x112).u64(0).u64(1).append(csr_record(1)).u64(0);
  NamedArrays sparse = load_params_from_memory(csr_file.data.data(), csr_file.data.size(), "c");
  value_error_of([&] { save_params(path, sparse, /*v3=*/true); });
  sparse.arrays[0].aux_bytes.pop_back();
  value_error_of([&] { save_params(path, sparse); });

  EXPECT_EQ(read_bytes(path), (std::vector<uint8_t>{1, 2, 3}));
}

// ---- corrupt input ------------------------------------------------------------------------------

TEST(SerializeParams, EveryTruncatedPrefixIsAValueError) {
  const std::vector<uint8_t> file = hand_written_params();
  for (size_t n = 0; n < file.size(); ++n) {
    // A copy of exactly n bytes, so that reading past it is caught by ASan.
    const std::vector<uint8_t> prefix(file.begin(), file.begin() + n);
    const std::string message =
        value_error_of([&] { load_params_from_memory(prefix.data(), n, "cut.params"); });
    EXPECT_NE(message.find("'cut.params' at byte offset"), std::string::npos)
        << "prefix " << n << ": " << message;
  }
}

TEST(SerializeParams, TruncatedFileOnDiskNamesPathAndOffset) {
  ScratchDir dir;
  std::vector<uint8_t> file = hand_written_params();
  file.resize(60);  // record 0 ends before its type flag
  write_bytes(dir.file("cut.params"), file);
  const std::string message = value_error_of([&] { load_params(dir.file("cut.params")); });
  EXPECT_NE(message.find(dir.file("cut.params")), std::string::npos) << message;
  EXPECT_NE(message.find("byte offset 60"), std::string::npos) << message;
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;
}

/// Loads `b` and returns the error message.
std::string load_error(const Bytes& b) {
  return value_error_of([&] { load_params_from_memory(b.data.data(), b.data.size(), "bad"); });
}

Bytes header(uint64_t count) {
  Bytes b;
  b.u64(0x112).u64(0).u64(count);
  return b;
}

TEST(SerializeParams, CorruptFieldsGiveSpecificErrors) {
  auto contains = [](const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
  };
  {
    Bytes b;
    b.u64(0x113).u64(0).u64(0).u64(0);
    EXPECT_TRUE(contains(load_error(b), "not an MXNet .params file")) << load_error(b);
  }
  {
    Bytes b = header(uint64_t{1} << 62);
    b.u64(0);
    EXPECT_TRUE(contains(load_error(b), "array count")) << load_error(b);
  }
  {
    Bytes b = header(1);
    b.u32(kV2).i32(0).i32(0x7FFFFFFF);  // ndim far beyond the file
    EXPECT_TRUE(contains(load_error(b), "truncated")) << load_error(b);
  }
  {
    Bytes b = header(1);
    b.u32(kV2).i32(0).i32(-2);
    EXPECT_TRUE(contains(load_error(b), "ndim -2")) << load_error(b);
  }
  {
    Bytes b = header(1);
    b.u32(kV2).i32(0).shape({2, -3});
    EXPECT_TRUE(contains(load_error(b), "negative")) << load_error(b);
  }
  {
    Bytes b = header(1);
    b.u32(kV2).i32(7).shape({1});
    EXPECT_TRUE(contains(load_error(b), "storage type is 7")) << load_error(b);
  }
  {
    Bytes b = header(1);
    b.u32(kV3).i32(2).shape({1});
    EXPECT_TRUE(contains(load_error(b), "dense only")) << load_error(b);
  }
  {
    Bytes b = header(1);
    b.u32(kV2).i32(0).shape({1}).i32(9).i32(0).i32(0).f32(1).u64(0);
    EXPECT_TRUE(contains(load_error(b), "device type is 9")) << load_error(b);
  }
  {
    Bytes b = header(1);
    b.u32(kV2).i32(0).shape({1}).i32(1).i32(0).i32(13).f32(1).u64(0);
    EXPECT_TRUE(contains(load_error(b), "type flag is 13")) << load_error(b);
  }
  {
    Bytes b = header(1);  // 2^62 * 2^62 elements overflow the byte count
    b.u32(kV2).i32(0).shape({int64_t{1} << 62, int64_t{1} << 62}).i32(1).i32(0).i32(0);
    EXPECT_TRUE(contains(load_error(b), "overflows")) << load_error(b);
  }
  {
    Bytes b = header(1);  // a huge but non-overflowing size must not be allocated
    b.u32(kV2).i32(0).shape({int64_t{1} << 40}).i32(1).i32(0).i32(0).f32(0);
    EXPECT_TRUE(contains(load_error(b), "truncated")) << load_error(b);
  }
  {
    Bytes b = header(1);  // legacy record whose "ndim" is garbage
    b.u32(0x12345678).u32(0);
    EXPECT_TRUE(contains(load_error(b), "legacy")) << load_error(b);
  }
  {
    Bytes b = header(1);
    b.u32(kV2).i32(0).i32(0).u64(3).str("a").str("b").str("c");
    EXPECT_TRUE(contains(load_error(b), "3 names for 1 arrays")) << load_error(b);
  }
  {
    Bytes b = header(1);
    b.u32(kV2).i32(0).i32(0).u64(1).u64(~uint64_t{0});
    EXPECT_TRUE(contains(load_error(b), "name 0")) << load_error(b);
  }
  {
    Bytes b = header(0);
    b.u64(uint64_t{1} << 60);
    EXPECT_TRUE(contains(load_error(b), "name count")) << load_error(b);
  }
  EXPECT_TRUE(
      contains(value_error_of([] { load_params_from_memory(nullptr, 4, "null"); }), "null"));
}

TEST(SerializeParams, MissingFileOrDirectoryIsAValueError) {
  ScratchDir dir;
  const std::string missing = dir.file("missing.params");
  EXPECT_NE(value_error_of([&] { load_params(missing); }).find(missing), std::string::npos);
  EXPECT_NE(value_error_of([&] { load_params(dir.file("")); }).find("directory"),
            std::string::npos);
  NamedArrays empty;
  value_error_of([&] { save_params(dir.file("no_such_dir/x.params"), empty); });
}

// ---- .npy ---------------------------------------------------------------------------------------

/// A .npy v1.0 file with `dict` as its header, padded like NumPy pads it.
std::vector<uint8_t> npy_v1(const std::string& dict, const Bytes& data) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes b;
  b.text("\x93NUMPY").u8(1).u8(0).u16(static_cast<uint16_t>(header.size())).text(header);
  return b.append(data).data;
}

TEST(SerializeNpy, ReadsHandWrittenV1File) {
  Bytes data;
  for (int i = 0; i < 6; ++i) data.i32(i * 10 - 20);
  const std::vector<uint8_t> file =
      npy_v1("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", data);
  ASSERT_EQ((file.size() - 24) % 64, 0u);
  const HostArray a = load_npy_from_memory(file.data(), file.size(), "hand.npy");
  EXPECT_EQ(a.shape, (Shape{2, 3}));
  EXPECT_EQ(a.dtype, DType::kInt32);
  EXPECT_EQ(a.device, Device::cpu());
  EXPECT_EQ(values_of<int32_t>(a.bytes), (std::vector<int32_t>{-20, -10, 0, 10, 20, 30}));
}

TEST(SerializeNpy, ReadsV2HeaderAndLenientSpellings) {
  // Version 2.0: u32 header length; double quotes, no trailing comma, Python 2 'L' suffixes.
  const std::string header = "{\"descr\": \"<f8\", \"shape\": (2L,), \"fortran_order\": False}\n";
  Bytes b;
  b.text("\x93NUMPY").u8(2).u8(0).u32(static_cast<uint32_t>(header.size())).text(header);
  b.f64(1.25).f64(-3);
  const HostArray a = load_npy_from_memory(b.data.data(), b.data.size(), "v2.npy");
  EXPECT_EQ(a.shape, (Shape{2}));
  EXPECT_EQ(a.dtype, DType::kFloat64);
  EXPECT_EQ(values_of<double>(a.bytes), (std::vector<double>{1.25, -3}));
}

TEST(SerializeNpy, WritesNumpyLayout) {
  const HostArray a = dense(Shape{2, 3}, DType::kFloat32, pattern(24, 1));
  const std::vector<uint8_t> file = save_npy_to_memory(a);
  const std::vector<uint8_t> want =
      npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
             Bytes().text(std::string(a.bytes.begin(), a.bytes.end())));
  EXPECT_EQ(file, want);

  const std::vector<uint8_t> one_d =
      save_npy_to_memory(dense(Shape{4}, DType::kBool, {1, 0, 0, 1}));
  const std::vector<uint8_t> want_1d =
      npy_v1("{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", Bytes().u32(0x01000001));
  EXPECT_EQ(one_d, want_1d);
}

TEST(SerializeNpy, RoundTripsEveryNumpyDtypeIncludingScalarAndBool) {
  ScratchDir dir;
  int seed = 0;
  for (DType t : kAllDTypes) {
    if (t == DType::kBFloat16) continue;  // NumPy has no bfloat16
    SCOPED_TRACE(dtype_name(t));
    HostArray a = dense(Shape{3, 2}, t, pattern(6 * element_size(t), seed++));
    if (t == DType::kBool) a.bytes = {1, 0, 0, 1, 1, 0};
    save_npy(dir.file("a.npy"), a);
    const HostArray back = load_npy(dir.file("a.npy"));
    EXPECT_EQ(back.shape, a.shape);
    EXPECT_EQ(back.dtype, t);
    EXPECT_EQ(back.bytes, a.bytes);
  }
  const HostArray scalar =
      dense(Shape(std::vector<int64_t>{}), DType::kFloat32, bytes_of<float>({3.5f}));
  save_npy(dir.file("s.npy"), scalar);
  const HostArray scalar_back = load_npy(dir.file("s.npy"));
  EXPECT_EQ(scalar_back.shape.ndim(), 0);
  EXPECT_EQ(values_of<float>(scalar_back.bytes), (std::vector<float>{3.5f}));

  const HostArray empty = dense(Shape{0, 4}, DType::kInt64, {});
  const std::vector<uint8_t> file = save_npy_to_memory(empty);
  EXPECT_EQ(load_npy_from_memory(file.data(), file.size(), "e").shape, (Shape{0, 4}));
}

TEST(SerializeNpy, RejectsBigEndianFortranAndUnknownDescrClearly) {
  auto error = [](const std::string& dict, const Bytes& data) {
    const std::vector<uint8_t> f = npy_v1(dict, data);
    return value_error_of([&] { load_npy_from_memory(f.data(), f.size(), "x.npy"); });
  };
  const Bytes four = Bytes().u32(0).u32(0).u32(0).u32(0);
  const std::string big = error("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", four);
  EXPECT_NE(big.find("big-endian"), std::string::npos) << big;
  EXPECT_NE(big.find("x.npy"), std::string::npos) << big;
  const std::string fortran =
      error("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", four);
  EXPECT_NE(fortran.find("fortran_order"), std::string::npos) << fortran;
  const std::string complex =
      error("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", four);
  EXPECT_NE(complex.find("unsupported descr '<c8'"), std::string::npos) << complex;
  const std::string record =
      error("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", four);
  EXPECT_NE(record.find("structured"), std::string::npos) << record;
  const std::string missing = error("{'descr': '<f4', 'shape': (4,), }", four);
  EXPECT_NE(missing.find("fortran_order"), std::string::npos) << missing;
  const std::string short_data =
      error("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", four);
  EXPECT_NE(short_data.find("truncated"), std::string::npos) << short_data;
  // A big-endian single-byte type has no byte order to get wrong.
  const std::vector<uint8_t> u1 =
      npy_v1("{'descr': '>u1', 'fortran_order': True, 'shape': (2,), }", Bytes().u8(4).u8(5));
  EXPECT_EQ(load_npy_from_memory(u1.data(), u1.size(), "u1").bytes, (std::vector<uint8_t>{4, 5}));
}

TEST(SerializeNpy, EveryTruncatedPrefixAndBadMagicIsAValueError) {
  const std::vector<uint8_t> file =
      save_npy_to_memory(dense(Shape{2}, DType::kInt16, {1, 2, 3, 4}));
  for (size_t n = 0; n < file.size(); ++n) {
    const std::vector<uint8_t> prefix(file.begin(), file.begin() + n);
    value_error_of([&] { load_npy_from_memory(prefix.data(), n, "cut.npy"); });
  }
  std::vector<uint8_t> bad = file;
  bad[1] = 'X';
  EXPECT_NE(value_error_of([&] {
              load_npy_from_memory(bad.data(), bad.size(), "m");
            }).find("not a .npy file"),
            std::string::npos);
  bad = file;
  bad[6] = 9;
  EXPECT_NE(value_error_of([&] {
              load_npy_from_memory(bad.data(), bad.size(), "v");
            }).find("version 9.0"),
            std::string::npos);
}

TEST(SerializeNpy, SaveRejectsWhatNumpyCannotHold) {
  value_error_of([] { save_npy_to_memory(dense(Shape{1}, DType::kBFloat16, {0, 0})); });
  value_error_of([] { save_npy_to_memory(HostArray{}); });
  value_error_of([] { save_npy_to_memory(dense(Shape{2}, DType::kFloat32, {0, 0, 0, 0})); });
  value_error_of([] { load_npy("/nonexistent/weft/x.npy"); });
}

/// Runs a shell command; true on exit status 0.
bool run(const std::string& command) { return std::system(command.c_str()) == 0; }

TEST(SerializeNpy, AgreesWithNumpyWhenAvailable) {
  if (!run("python3 -c 'import numpy' >/dev/null 2>&1")) {
    GTEST_SKIP() << "python3 with numpy is not available";
  }
  ScratchDir dir;
  const std::string from_numpy = dir.file("ref.npy");
  ASSERT_TRUE(run("python3 -c \"import numpy as np; np.save('" + from_numpy +
                  "', np.arange(6, dtype='<f4').reshape(2, 3) * 0.5)\""));
  const HostArray ref = load_npy(from_numpy);
  EXPECT_EQ(ref.shape, (Shape{2, 3}));
  EXPECT_EQ(values_of<float>(ref.bytes), (std::vector<float>{0, 0.5, 1, 1.5, 2, 2.5}));

  const std::string ours = dir.file("ours.npy");
  save_npy(ours, dense(Shape{2, 2}, DType::kInt64, bytes_of<int64_t>({1, -2, 3, -4})));
  EXPECT_TRUE(run("python3 -c \"import numpy as np; a = np.load('" + ours +
                  "'); assert a.dtype == np.int64 and a.tolist() == [[1, -2], [3, -4]]\""));
}

}  // namespace
}  // namespace weft
