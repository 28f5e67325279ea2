// Hostile .params and .npy files through the whole load path to NDArray: sparse records whose
// logical shape overflows or exceeds the device, inconsistent sparse counts, huge .npy headers,
// and NDArray allocation larger than the device, sparse records that densify out of all
// proportion to the file (LoadOptions::max_sparse_expansion_bytes). Each must end in a
// weft::Error naming the array, never a crash (see Note [Densifying hostile records] in
// ndarray/io.cc).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "devices/device_api.h"
#include "ndarray/io.h"
#include "tests/ndarray/crafted_params.h"

namespace weft {
namespace {

using testing::csr_params;
using testing::empty_row_sparse_params;
using testing::ParamsBytes;
using testing::row_sparse_params;

constexpr int64_t k2to59 = int64_t{1} << 59;
constexpr int64_t k2to62 = int64_t{1} << 62;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

LoadedArrays load(const std::vector<uint8_t>& bytes) {
  return load_arrays_from_memory(bytes.data(), bytes.size(), "crafted.params");
}

LoadedArrays load(const std::vector<uint8_t>& bytes, uint64_t max_sparse_expansion_bytes) {
  LoadOptions options;
  options.max_sparse_expansion_bytes = max_sparse_expansion_bytes;
  return load_arrays_from_memory(bytes.data(), bytes.size(), "crafted.params", options);
}

// The ValueError `f` throws; a test failure when it throws none.
template <typename F>
std::string value_error_of(F&& f) {
  try {
    f();
  } catch (const ValueError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ValueError";
  return "";
}

// The first record: a row_sparse (2^59, 16) whose dense size wraps to 0, so that the
// scatter wrote a file-chosen row at a file-chosen offset.
TEST(HostileParams, RowSparseWhoseDenseSizeOverflowsNamesTheArray) {
  const auto bytes = row_sparse_params("arg:fc_weight", k2to59, 16, k2to59 / 2);
  try {
    load(bytes);
    FAIL() << "a (2^59, 16) row_sparse record loaded";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "arg:fc_weight")) << e.what();
    EXPECT_TRUE(contains(e.what(), "(576460752303423488, 16)")) << e.what();
    EXPECT_TRUE(contains(e.what(), "crafted.params")) << e.what();
  }
}

// The second record: csr (1, 2^62).
TEST(HostileParams, CsrWhoseDenseSizeOverflowsNamesTheArray) {
  const auto bytes = csr_params("arg:embed", k2to62, k2to62 - 1);
  try {
    load(bytes);
    FAIL() << "a (1, 2^62) csr record loaded";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "arg:embed")) << e.what();
    EXPECT_TRUE(contains(e.what(), "(1, 4611686018427387904)")) << e.what();
  }
}

// Within weft's size limit but far larger than any machine: refused before allocating.
TEST(HostileParams, SparseRecordLargerThanTheMachineIsOutOfMemoryNamingTheArray) {
  if (device_memory_capacity(Device::cpu()) == 0)
    GTEST_SKIP() << "the machine's memory size is unknown";
  const int64_t rows = int64_t{1} << 44;  // x 16 float32 = 2^50 bytes (1 PiB)
  try {
    load(row_sparse_params("aux:table", rows, 16, rows - 1));
    FAIL() << "a 1 PiB row_sparse record loaded";
  } catch (const OutOfMemory& e) {
    EXPECT_TRUE(contains(e.what(), "aux:table")) << e.what();
    EXPECT_TRUE(contains(e.what(), "(17592186044416, 16)")) << e.what();
  }
}

TEST(HostileParams, SparseIndicesOutsideTheShapeAreValueErrors) {
  EXPECT_THROW(load(row_sparse_params("r", 4, 3, 4)), ValueError);   // row 4 of 4
  EXPECT_THROW(load(row_sparse_params("r", 4, 3, -1)), ValueError);  // negative row
  EXPECT_THROW(load(csr_params("c", 5, 5)), ValueError);             // column 5 of 5
  EXPECT_THROW(load(csr_params("c", 5, -2)), ValueError);
}

TEST(HostileParams, RowSparseWithMoreIndicesThanRowsIsAValueError) {
  // Two stored rows for a one-row array: the values would overrun the dense array's rows.
  ParamsBytes b;
  b.header(1).put<uint32_t>(testing::kMagicV2).put<int32_t>(1);
  b.shape({2, 2}).shape({1, 2}).put<int32_t>(1).put<int32_t>(0).put<int32_t>(testing::kFlagFloat32);
  b.put<int32_t>(testing::kFlagInt64).shape({2});
  for (float v : {1.f, 2.f, 3.f, 4.f}) b.put<float>(v);
  b.put<int64_t>(0).put<int64_t>(0);
  b.names({"r"});
  try {
    load(b.bytes);
    FAIL() << "loaded";
  } catch (const ValueError& e) {
    EXPECT_TRUE(contains(e.what(), "'r'")) << e.what();
  }
}

TEST(HostileParams, CsrWithANonMonotoneIndptrIsAValueError) {
  ParamsBytes b;
  b.header(1).put<uint32_t>(testing::kMagicV2).put<int32_t>(2);
  b.shape({1}).shape({2, 4}).put<int32_t>(1).put<int32_t>(0).put<int32_t>(testing::kFlagFloat32);
  b.put<int32_t>(testing::kFlagInt64).shape({3});
  b.put<int32_t>(testing::kFlagInt64).shape({1});
  b.put<float>(1.f);
  b.put<int64_t>(0).put<int64_t>(1).put<int64_t>(0);  // row 1 ends before it starts
  b.put<int64_t>(2);
  b.names({"c"});
  EXPECT_THROW(load(b.bytes), ValueError);
}

TEST(HostileParams, SparseIndicesOfAFloatTypeAreAValueError) {
  ParamsBytes b;
  b.header(1).put<uint32_t>(testing::kMagicV2).put<int32_t>(1);
  b.shape({1, 2}).shape({3, 2}).put<int32_t>(1).put<int32_t>(0).put<int32_t>(testing::kFlagFloat32);
  b.put<int32_t>(testing::kFlagFloat32).shape({1});  // float "indices"
  b.put<float>(1.f).put<float>(2.f).put<float>(1.f);
  b.names({"r"});
  EXPECT_THROW(load(b.bytes), ValueError);
}

TEST(HostileParams, DenseRecordWithAHugeShapeIsAValueErrorNamingTheFile) {
  ParamsBytes b;
  b.header(1).put<uint32_t>(testing::kMagicV2).put<int32_t>(0);
  b.shape({k2to62, k2to62}).put<int32_t>(1).put<int32_t>(0).put<int32_t>(testing::kFlagFloat32);
  b.names({"d"});
  try {
    load(b.bytes);
    FAIL() << "loaded";
  } catch (const ValueError& e) {
    EXPECT_TRUE(contains(e.what(), "crafted.params")) << e.what();
    EXPECT_TRUE(contains(e.what(), "4611686018427387904")) << e.what();
  }
}

TEST(HostileParams, ValidSparseRecordsStillLoad) {
  auto rsp = load(row_sparse_params("r", 3, 2, 2));
  EXPECT_EQ(rsp.get("r").to_vector<float>(), (std::vector<float>{0, 0, 0, 0, 1, 2}));
  auto csr = load(csr_params("c", 4, 1));
  EXPECT_EQ(csr.get("c").to_vector<float>(), (std::vector<float>{0, 7, 0, 0}));
}

TEST(SparseExpansion, EmptyRecordDeclaringOneGiBIsRefusedNamingTheLimit) {
  // 121 bytes: row_sparse (2^28, 1) float32 with no stored rows densifies to 1 GiB.
  const auto bytes = empty_row_sparse_params("arg:w", int64_t{1} << 28, 1);
  ASSERT_EQ(bytes.size(), 121u);
  const std::string m = value_error_of([&] { load(bytes); });
  EXPECT_TRUE(contains(m, "crafted.params")) << m;
  EXPECT_TRUE(contains(m, "'arg:w'")) << m;
  EXPECT_TRUE(contains(m, "1073741824")) << m;
  EXPECT_TRUE(contains(m, "max_sparse_expansion_bytes")) << m;
}

TEST(SparseExpansion, RaisingTheLimitLoadsALargeEmptyRecord) {
  // (1024, 1024) float32: 4 MiB of zeros from 121 bytes.
  const auto bytes = empty_row_sparse_params("arg:w", 1024, 1024);
  const std::string m = value_error_of([&] { load(bytes, uint64_t{1} << 20); });
  EXPECT_TRUE(contains(m, "'arg:w'")) << m;
  EXPECT_TRUE(contains(m, "4194304")) << m;
  for (uint64_t limit : {uint64_t{4} << 20, kDefaultMaxSparseExpansionBytes}) {
    const LoadedArrays loaded = load(bytes, limit);
    const std::vector<float> v = loaded.get("arg:w").to_vector<float>();
    ASSERT_EQ(v.size(), 1024u * 1024u);
    EXPECT_EQ(std::count(v.begin(), v.end(), 0.0f), static_cast<ptrdiff_t>(v.size()));
  }
}

TEST(SparseExpansion, TheLimitCountsEverySparseRecordOfTheFile) {
  // Two empty (512, 384) float32 records, 768 KiB each: each alone within 1 MiB, not both.
  ParamsBytes b;
  b.header(2);
  for (int i = 0; i < 2; ++i) {
    b.put<uint32_t>(testing::kMagicV2).put<int32_t>(1);
    b.shape({0, 384}).shape({512, 384});
    b.put<int32_t>(1).put<int32_t>(0).put<int32_t>(testing::kFlagFloat32);
    b.put<int32_t>(testing::kFlagInt64).shape({0});
  }
  b.names({"first", "second"});
  const std::string m = value_error_of([&] { load(b.bytes, uint64_t{1} << 20); });
  EXPECT_TRUE(contains(m, "'second'")) << m;
  EXPECT_TRUE(contains(m, "1572864 dense bytes")) << m;
  EXPECT_EQ(load(b.bytes, uint64_t{2} << 20).arrays.size(), 2u);
}

TEST(SparseExpansion, RecordsStoringAProportionateShareLoadPastTheLimit) {
  // (1024, 1024) float32, 4 MiB dense, stores one row (4096 bytes) and its index (8): at least
  // 1/kSparseExpansionRatio of its dense size, so a 1 MiB limit does not refuse it.
  const auto bytes = row_sparse_params("p", 1024, 1024, 5);
  const std::vector<float> v = load(bytes, uint64_t{1} << 20).get("p").to_vector<float>();
  ASSERT_EQ(v.size(), 1024u * 1024u);
  EXPECT_EQ(v[5 * 1024], 1.0f);
  EXPECT_EQ(v[5 * 1024 + 1023], 1024.0f);
  EXPECT_EQ(v[4 * 1024], 0.0f);
}

TEST(HostileParams, ThroughAFileTheMessageNamesThePath) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("weft_hostile_" + std::to_string(::getpid()) + ".params"))
                               .string();
  testing::write_bytes(path, row_sparse_params("arg:w", k2to59, 16, 0));
  try {
    load_arrays(path);
    FAIL() << "loaded";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), path)) << e.what();
    EXPECT_TRUE(contains(e.what(), "arg:w")) << e.what();
  }
  std::filesystem::remove(path);
}

std::vector<uint8_t> npy_with_header(const std::string& header) {
  std::vector<uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  std::string h = header;
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  b.push_back(static_cast<uint8_t>(h.size() & 0xff));
  b.push_back(static_cast<uint8_t>(h.size() >> 8));
  b.insert(b.end(), h.begin(), h.end());
  return b;
}

TEST(HostileNpy, HugeShapeIsAValueErrorNamingTheSource) {
  const auto b = npy_with_header(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4)}");
  try {
    load_npy_array_from_memory(b.data(), b.size(), "huge.npy");
    FAIL() << "loaded";
  } catch (const ValueError& e) {
    EXPECT_TRUE(contains(e.what(), "huge.npy")) << e.what();
    EXPECT_TRUE(contains(e.what(), "4611686018427387904")) << e.what();
  }
}

TEST(HostileNpy, ShapeWhoseByteCountWrapsIsAValueError) {
  // 2^62 float64 elements: 2^65 bytes, which wraps to 0 in 64 bits.
  const auto b = npy_with_header(
      "{'descr': '<f8', 'fortran_order': False, 'shape': (2147483648, 2147483648)}");
  EXPECT_THROW(load_npy_array_from_memory(b.data(), b.size(), "wrap.npy"), ValueError);
}

TEST(HostileNpy, ZeroSizedArrayWithHugeOtherDimensionIsRefused) {
  // No bytes, but its strides would overflow: refused like any shape beyond the limit.
  const auto b = npy_with_header(
      "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 16)}");
  EXPECT_THROW(load_npy_array_from_memory(b.data(), b.size(), "zero.npy"), ValueError);
}

// The capacity every check above compares with, against the kernel's own figure.
TEST(DeviceCapacity, CpuAndPinnedMemoryAreThePhysicalMemory) {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  while (meminfo >> key) {
    if (key == "MemTotal:") {
      meminfo >> kib;
      break;
    }
    meminfo.ignore(1 << 10, '\n');
  }
  if (kib == 0) GTEST_SKIP() << "no MemTotal in /proc/meminfo";
  EXPECT_EQ(device_memory_capacity(Device::cpu()), kib * 1024);
  EXPECT_EQ(device_memory_capacity(Device{DeviceType::kCUDAHost, 0}), kib * 1024);
  // Unknown devices report 0, and then nothing is refused for them.
  EXPECT_EQ(device_memory_capacity(Device{DeviceType::kCPU, 3}), 0u);
  if (DeviceAPI::try_get(DeviceType::kCUDA) == nullptr ||
      DeviceAPI::get(DeviceType::kCUDA)->device_count() == 0) {
    EXPECT_EQ(device_memory_capacity(Device::cuda(0)), 0u);
  } else {
    EXPECT_GT(device_memory_capacity(Device::cuda(0)), size_t{1} << 28);
  }
}

TEST(NDArrayAllocation, LargerThanTheDeviceFailsBeforeAllocatingNamingTheShape) {
  if (device_memory_capacity(Device::cpu()) == 0)
    GTEST_SKIP() << "the machine's memory size is unknown";
  const Shape shape{int64_t{1} << 40, int64_t{1} << 12};  // 2^52 float32 = 16 PiB
  try {
    NDArray::empty(shape);
    FAIL() << "allocated 16 PiB";
  } catch (const OutOfMemory& e) {
    EXPECT_TRUE(contains(e.what(), "(1099511627776, 4096)")) << e.what();
    EXPECT_TRUE(contains(e.what(), "cpu:0")) << e.what();
  }
  EXPECT_THROW(NDArray::zeros(shape), OutOfMemory);
}

TEST(NDArrayAllocation, ShapeBeyondTheLimitIsAShapeError) {
  EXPECT_THROW(NDArray::empty(Shape{k2to62, k2to62}), ShapeError);
  EXPECT_THROW(NDArray::empty(Shape{k2to62, 4}), ShapeError);
}

}  // namespace
}  // namespace weft
