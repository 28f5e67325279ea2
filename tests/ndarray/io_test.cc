// NDArray save/load through .params and .npy: round trips, arg:/aux: names, sparse densifying.
#include "ndarray/io.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "ndarray/serialize.h"

namespace weft {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("weft_io_test_" + name)).string();
}

TEST(NDArrayIo, ParamsDictRoundTripKeepsNamesValuesAndDtypes) {
  auto w = NDArray::from_vector<float>(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  auto m = NDArray::from_vector<double>(Shape{3}, {0.5, -1, 2});
  auto i = NDArray::from_vector<int64_t>(Shape{2}, {7, -8});
  const std::string path = temp_path("dict.params");
  save_arrays(path, {{"arg:fc_weight", w}, {"aux:bn_moving_mean", m}, {"idx", i}});
  LoadedArrays loaded = load_arrays(path);
  ASSERT_EQ(loaded.names.size(), 3u);
  EXPECT_EQ(loaded.get("arg:fc_weight").to_vector<float>(), w.to_vector<float>());
  EXPECT_EQ(loaded.get("arg:fc_weight").shape(), (Shape{2, 3}));
  EXPECT_EQ(loaded.get("aux:bn_moving_mean").to_vector<double>(), m.to_vector<double>());
  EXPECT_EQ(loaded.get("idx").to_vector<int64_t>(), i.to_vector<int64_t>());
  EXPECT_THROW(loaded.get("missing"), ValueError);
  std::filesystem::remove(path);
}

TEST(NDArrayIo, ParamsListRoundTrip) {
  const std::string path = temp_path("list.params");
  save_arrays(path, std::vector<NDArray>{NDArray::full(Shape{4}, 3.0), NDArray::zeros(Shape{1, 1})},
              /*v3=*/true);
  LoadedArrays loaded = load_arrays(path);
  EXPECT_TRUE(loaded.names.empty());
  ASSERT_EQ(loaded.arrays.size(), 2u);
  EXPECT_EQ(loaded.arrays[0].to_vector<float>(), (std::vector<float>{3, 3, 3, 3}));
  std::filesystem::remove(path);
}

TEST(NDArrayIo, SparseRecordsLoadDense) {
  // A csr 2x3 matrix [[0, 5, 0], [7, 0, 8]] and a row_sparse 3x2 with row 1 = [1, 2].
  NamedArrays raw;
  HostArray csr;
  csr.shape = Shape{2, 3};
  csr.dtype = DType::kFloat32;
  csr.storage_type = 2;
  float vals[] = {5, 7, 8};
  csr.bytes.assign(reinterpret_cast<uint8_t*>(vals),
                   reinterpret_cast<uint8_t*>(vals) + sizeof(vals));
  csr.storage_shape = Shape{3};
  int64_t indptr[] = {0, 1, 3}, indices[] = {1, 0, 2};
  csr.aux_meta = {{DType::kInt64, Shape{3}}, {DType::kInt64, Shape{3}}};
  csr.aux_bytes = {std::vector<uint8_t>(reinterpret_cast<uint8_t*>(indptr),
                                        reinterpret_cast<uint8_t*>(indptr) + 24),
                   std::vector<uint8_t>(reinterpret_cast<uint8_t*>(indices),
                                        reinterpret_cast<uint8_t*>(indices) + 24)};
  HostArray rsp;
  rsp.shape = Shape{3, 2};
  rsp.dtype = DType::kFloat32;
  rsp.storage_type = 1;
  float rv[] = {1, 2};
  rsp.bytes.assign(reinterpret_cast<uint8_t*>(rv), reinterpret_cast<uint8_t*>(rv) + sizeof(rv));
  rsp.storage_shape = Shape{1, 2};
  int64_t rows[] = {1};
  rsp.aux_meta = {{DType::kInt64, Shape{1}}};
  rsp.aux_bytes = {
      std::vector<uint8_t>(reinterpret_cast<uint8_t*>(rows), reinterpret_cast<uint8_t*>(rows) + 8)};
  raw.names = {"csr", "rsp"};
  raw.arrays = {csr, rsp};
  const std::string path = temp_path("sparse.params");
  save_params(path, raw);
  LoadedArrays loaded = load_arrays(path);
  EXPECT_EQ(loaded.get("csr").to_vector<float>(), (std::vector<float>{0, 5, 0, 7, 0, 8}));
  EXPECT_EQ(loaded.get("rsp").to_vector<float>(), (std::vector<float>{0, 0, 1, 2, 0, 0}));
  std::filesystem::remove(path);
}

TEST(NDArrayIo, NpyRoundTrip) {
  const std::string path = temp_path("a.npy");
  auto a = NDArray::from_vector<float>(Shape{2, 2}, {1.5, -2, 3, 4});
  save_npy_array(path, a);
  NDArray b = load_npy_array(path);
  EXPECT_EQ(b.shape(), a.shape());
  EXPECT_EQ(b.to_vector<float>(), a.to_vector<float>());
  std::filesystem::remove(path);
}

TEST(NDArrayIo, MissingFileIsAClearError) {
  EXPECT_THROW(load_arrays("/nonexistent/weft.params"), ValueError);
  EXPECT_THROW(load_npy_array("/nonexistent/weft.npy"), ValueError);
}

}  // namespace
}  // namespace weft
