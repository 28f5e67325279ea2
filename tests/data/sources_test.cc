// File sources: npy_files() against .npy files built byte by byte here (and by save_npy), and
// image_folder() against folders made here.
#include "data/sources.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ndarray/serialize.h"
#include "tests/data/data_test_util.h"

namespace weft::data {
namespace {

namespace fs = std::filesystem;
using namespace testing;  // NOLINT(google-build-using-namespace)

/// A .npy file as NumPy lays it out: magic, version, header length (u16 for 1.0, u32 for 2.0
/// and 3.0), the dict padded with spaces and a newline so that the data starts at a multiple of
/// `align` bytes, then the payload.
std::vector<uint8_t> npy_bytes(const std::string& dict, const std::vector<uint8_t>& payload,
                               int major = 1, size_t align = 64) {
  const size_t preamble = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((preamble + header.size() + 1) % align != 0) header += ' ';
  header += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(major), 0};
  const size_t n = header.size();
  out.push_back(static_cast<uint8_t>(n));
  out.push_back(static_cast<uint8_t>(n >> 8));
  if (major != 1) {
    out.push_back(static_cast<uint8_t>(n >> 16));
    out.push_back(static_cast<uint8_t>(n >> 24));
  }
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

/// The values of `a` as T (any dtype of T's size; DTypeOf has no uint16).
template <typename T>
std::vector<T> raw_values(const NDArray& a) {
  std::vector<T> out(a.nbytes() / sizeof(T));
  a.copy_to_host(out.data(), a.nbytes());
  return out;
}

// ---- npy_files ------------------------------------------------------------------------------

TEST(NpyFilesTest, YieldsRowsOfShardsInOrderAsReadOnlyZeroCopyViews) {
  TempDir dir;
  write_file(dir.file("x0.npy"),
             npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }",
                       as_bytes<float>({0, 1, 2, 3, 4, 5})));
  write_file(dir.file("y0.npy"), npy_bytes("{'descr': '<i8', 'fortran_order': False, "
                                           "'shape': (3,), }",
                                           as_bytes<int64_t>({10, 11, 12})));
  write_file(dir.file("x1.npy"),
             npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                       as_bytes<float>({6, 7, 8, 9})));
  write_file(dir.file("y1.npy"), npy_bytes("{'descr': '<i8', 'fortran_order': False, "
                                           "'shape': (2,), }",
                                           as_bytes<int64_t>({13, 14})));
  std::vector<Element> elements;
  {
    Dataset ds = npy_files(
        {{dir.file("x0.npy"), dir.file("y0.npy")}, {dir.file("x1.npy"), dir.file("y1.npy")}});
    EXPECT_EQ(ds.cardinality(), 5);
    elements = drain(ds);
  }  // the elements keep the mappings alive on their own
  ASSERT_EQ(elements.size(), 5u);
  for (int64_t i = 0; i < 5; ++i) {
    const Element& e = elements[i];
    EXPECT_EQ(e.index, i);
    ASSERT_EQ(e.arrays.size(), 2u);
    EXPECT_EQ(e.arrays[0].shape(), (Shape{2}));
    EXPECT_EQ(e.arrays[0].dtype(), DType::kFloat32);
    EXPECT_EQ(e.arrays[1].shape(), Shape(std::vector<int64_t>{}));
    EXPECT_EQ(e.arrays[1].dtype(), DType::kInt64);
    EXPECT_EQ(e.arrays[0].to_vector<float>(), (std::vector<float>{2.0f * i, 2.0f * i + 1}));
    EXPECT_EQ(e.arrays[1].to_vector<int64_t>(), std::vector<int64_t>{10 + i});
    EXPECT_TRUE(e.arrays[0].storage()->read_only);
    EXPECT_TRUE(e.arrays[1].storage()->read_only);
  }
  EXPECT_EQ(elements[1].origin, dir.file("x0.npy") + " row 1");
  EXPECT_EQ(elements[4].origin, dir.file("x1.npy") + " row 1");
  // Views into one mapping: consecutive rows are 8 bytes apart.
  EXPECT_EQ(static_cast<char*>(elements[1].arrays[0].raw_data()) -
                static_cast<char*>(elements[0].arrays[0].raw_data()),
            8);
}

TEST(NpyFilesTest, ReadsFormatVersions2And3AndOneDimensionalFortranOrder) {
  TempDir dir;
  write_file(dir.file("v2.npy"),
             npy_bytes("{'descr': '<u2', 'fortran_order': True, 'shape': (4,), }",
                       as_bytes<uint16_t>({1, 2, 3, 65535}), 2));
  write_file(dir.file("v3.npy"),
             npy_bytes("{\"descr\": \"|u1\", \"fortran_order\": False, \"shape\": (4, 1)}",
                       {9, 8, 7, 6}, 3));
  const std::vector<Element> elements =
      drain(npy_files({{dir.file("v2.npy"), dir.file("v3.npy")}}));
  ASSERT_EQ(elements.size(), 4u);
  const uint16_t expected_a[] = {1, 2, 3, 65535};
  const uint8_t expected_b[] = {9, 8, 7, 6};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(elements[i].arrays[0].dtype(), DType::kUInt16);
    EXPECT_EQ(raw_values<uint16_t>(elements[i].arrays[0]), std::vector<uint16_t>{expected_a[i]});
    EXPECT_EQ(elements[i].arrays[1].shape(), (Shape{1}));
    EXPECT_EQ(elements[i].arrays[1].to_vector<uint8_t>(), std::vector<uint8_t>{expected_b[i]});
  }
}

TEST(NpyFilesTest, MatchesArraysWrittenBySaveNpy) {
  TempDir dir;
  HostArray a;
  a.shape = Shape{5, 2, 3};
  a.dtype = DType::kFloat64;
  std::vector<double> values(30);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25 * static_cast<double>(i) - 3;
  a.bytes = as_bytes(values);
  save_npy(dir.file("a.npy"), a);
  const std::vector<Element> elements = drain(npy_files({{dir.file("a.npy")}}));
  ASSERT_EQ(elements.size(), 5u);
  for (size_t r = 0; r < 5; ++r) {
    EXPECT_EQ(elements[r].arrays[0].shape(), (Shape{2, 3}));
    EXPECT_EQ(elements[r].arrays[0].to_vector<double>(),
              std::vector<double>(values.begin() + 6 * r, values.begin() + 6 * r + 6));
  }
}

TEST(NpyFilesTest, MisalignedDataIsCopiedWithCorrectValues) {
  TempDir dir;
  // Alignment 1: the data starts at an odd offset, so float rows cannot be viewed in place.
  const std::vector<uint8_t> bytes =
      npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                as_bytes<float>({1.5f, -2, 3, 4}), 1, 1);
  write_file(dir.file("odd.npy"), bytes);
  ASSERT_NE((bytes.size() - 16) % 4, 0u);
  const std::vector<Element> elements = drain(npy_files({{dir.file("odd.npy")}}));
  ASSERT_EQ(elements.size(), 2u);
  EXPECT_EQ(elements[0].arrays[0].to_vector<float>(), (std::vector<float>{1.5f, -2}));
  EXPECT_EQ(elements[1].arrays[0].to_vector<float>(), (std::vector<float>{3, 4}));
}

TEST(NpyFilesTest, FilesWithZeroRowsAreSkipped) {
  TempDir dir;
  write_file(dir.file("empty.npy"),
             npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (0, 3), }", {}));
  write_file(dir.file("one.npy"), npy_bytes("{'descr': '<i4', 'fortran_order': False, "
                                            "'shape': (1, 3), }",
                                            as_bytes<int32_t>({7, 8, 9})));
  Dataset ds = npy_files({{dir.file("empty.npy")}, {dir.file("one.npy")}});
  EXPECT_EQ(ds.cardinality(), 1);
  const std::vector<Element> elements = drain(ds);
  ASSERT_EQ(elements.size(), 1u);
  EXPECT_EQ(elements[0].index, 0);
  EXPECT_EQ(elements[0].arrays[0].to_vector<int32_t>(), (std::vector<int32_t>{7, 8, 9}));
}

TEST(NpyFilesTest, BadFilesAreValueErrorsNamingTheFileAtCreation) {
  TempDir dir;
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::vector<uint8_t> payload = as_bytes<float>({1, 2});
  write_file(dir.file("good.npy"), npy_bytes(ok, payload));
  auto expect_bad = [&](const std::string& name, const std::vector<uint8_t>& bytes,
                        const std::string& problem) {
    write_file(dir.file(name), bytes);
    expect_value_error([&] { npy_files({{dir.file(name)}}); }, {name, problem});
  };
  std::vector<uint8_t> bad_magic = npy_bytes(ok, payload);
  bad_magic[1] = 'X';
  expect_bad("magic.npy", bad_magic, "magic");
  std::vector<uint8_t> version4 = npy_bytes(ok, payload);
  version4[6] = 4;
  expect_bad("version.npy", version4, "version 4.0");
  expect_bad("big.npy",
             npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", payload),
             "big-endian");
  expect_bad("fortran.npy",
             npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2), }", payload),
             "fortran_order is True");
  expect_bad("scalar.npy",
             npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", {0, 0, 0, 0}),
             "0-d");
  expect_bad("short.npy",
             npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", payload),
             "truncated");
  expect_bad(
      "record.npy",
      npy_bytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", payload),
      "structured");
  expect_bad("complex.npy",
             npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", payload),
             "unsupported descr");
  expect_bad("keys.npy", npy_bytes("{'descr': '<f4', 'shape': (2,), }", payload), "keys");
  std::vector<uint8_t> long_header = npy_bytes(ok, payload);
  long_header[9] = 0x7f;  // header length 0x7f.. > file
  expect_bad("header.npy", long_header, "truncated");
  expect_bad("tiny.npy", {0x93, 'N'}, "magic");
  expect_value_error([&] { npy_files({{dir.file("missing.npy")}}); }, {"missing.npy"});
  // Files of one shard must agree in their first dimension; shards in their arity.
  write_file(dir.file("three.npy"),
             npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                       as_bytes<float>({1, 2, 3})));
  expect_value_error(
      [&] {
        npy_files({{dir.file("good.npy"), dir.file("three.npy")}});
      },
      {"three.npy", "3 rows", "good.npy"});
  expect_value_error(
      [&] {
        npy_files({{dir.file("good.npy")}, {dir.file("good.npy"), dir.file("good.npy")}});
      },
      {"shard 1", "arity"});
  expect_value_error([&] { npy_files({}); }, {"no shards"});
}

// ---- image_folder ---------------------------------------------------------------------------

TEST(ImageFolderTest, SortedSubfoldersAreClassesAndFilesAreSortedWithin) {
  TempDir dir;
  for (const char* sub : {"b_dogs", "a_cats", "c_empty"}) fs::create_directory(dir.file(sub));
  write_file(dir.file("a_cats/2.JPG"), {1, 2, 3});
  write_file(dir.file("a_cats/1.png"), {4});
  write_file(dir.file("a_cats/notes.txt"), {5});
  write_file(dir.file("b_dogs/x.jpeg"), {});
  write_file(dir.file("top_level.jpg"), {6});  // not in a class folder
  EXPECT_EQ(image_folder_classes(dir.path()),
            (std::vector<std::string>{"a_cats", "b_dogs", "c_empty"}));
  Dataset ds = image_folder(dir.path());
  EXPECT_EQ(ds.cardinality(), 3);
  const std::vector<Element> elements = drain(ds);
  ASSERT_EQ(elements.size(), 3u);
  const std::vector<std::string> paths = {dir.file("a_cats/1.png"), dir.file("a_cats/2.JPG"),
                                          dir.file("b_dogs/x.jpeg")};
  const std::vector<std::vector<uint8_t>> bytes = {{4}, {1, 2, 3}, {}};
  const std::vector<int32_t> labels = {0, 0, 1};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(elements[i].index, static_cast<int64_t>(i));
    EXPECT_EQ(elements[i].origin, paths[i]);
    ASSERT_EQ(elements[i].arrays.size(), 2u);
    EXPECT_EQ(elements[i].arrays[0].dtype(), DType::kUInt8);
    EXPECT_EQ(elements[i].arrays[0].to_vector<uint8_t>(), bytes[i]);
    EXPECT_EQ(elements[i].arrays[1].shape(), Shape(std::vector<int64_t>{}));
    EXPECT_EQ(elements[i].arrays[1].to_vector<int32_t>(), std::vector<int32_t>{labels[i]});
  }
}

TEST(ImageFolderTest, ExtensionsOptionSelectsFilesCaseInsensitively) {
  TempDir dir;
  fs::create_directory(dir.file("k"));
  write_file(dir.file("k/a.BMP"), {1});
  write_file(dir.file("k/b.jpg"), {2});
  const std::vector<Element> elements = drain(image_folder(dir.path(), {{".bmp"}}));
  ASSERT_EQ(elements.size(), 1u);
  EXPECT_EQ(elements[0].origin, dir.file("k/a.BMP"));
}

TEST(ImageFolderTest, MissingRootOrNoClassFoldersIsValueErrorNamingThePath) {
  TempDir dir;
  expect_value_error([&] { image_folder(dir.file("nowhere")); }, {dir.file("nowhere")});
  expect_value_error([&] { image_folder_classes(dir.file("nowhere")); }, {dir.file("nowhere")});
  write_file(dir.file("loose.jpg"), {1});
  expect_value_error([&] { image_folder(dir.path()); }, {dir.path(), "no subfolders"});
  expect_value_error([&] { image_folder(dir.file("loose.jpg")); }, {"loose.jpg", "not a folder"});
}

TEST(ImageFolderTest, UnreadableFileIsDataErrorNamingItAndIterationContinues) {
  TempDir dir;
  fs::create_directory(dir.file("c"));
  write_file(dir.file("c/1.jpg"), {1});
  write_file(dir.file("c/2.jpg"), {2});
  write_file(dir.file("c/3.jpg"), {3});
  Dataset ds = image_folder(dir.path());
  fs::remove(dir.file("c/2.jpg"));  // listed when the dataset was made, gone when read
  std::unique_ptr<Iterator> it = ds.node()->make_iterator({});
  EXPECT_EQ(it->next()->arrays[0].to_vector<uint8_t>(), std::vector<uint8_t>{1});
  try {
    it->next();
    ADD_FAILURE() << "no DataError";
  } catch (const DataError& e) {
    EXPECT_EQ(e.index(), 1);
    EXPECT_EQ(e.origin(), dir.file("c/2.jpg"));
    EXPECT_NE(std::string(e.what()).find(dir.file("c/2.jpg")), std::string::npos) << e.what();
  }
  std::optional<Element> third = it->next();
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->arrays[0].to_vector<uint8_t>(), std::vector<uint8_t>{3});
  EXPECT_FALSE(it->next().has_value());
}

}  // namespace
}  // namespace weft::data
