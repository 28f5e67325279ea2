// Helpers shared by the data layer's tests: temporary folders, files of bytes, draining a
// dataset, and error-message expectations.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace weft::data::testing {

using Bytes = std::vector<uint8_t>;

/// A fresh temporary folder, removed with its contents at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "weft_data_test_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const {
    return (std::filesystem::path(path_) / name).string();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Every element of one pass (through the node's iterator, as a stage would see them).
inline std::vector<Element> drain(const Dataset& ds) {
  std::unique_ptr<Iterator> it = ds.node()->make_iterator({});
  std::vector<Element> out;
  while (std::optional<Element> e = it->next()) out.push_back(std::move(*e));
  return out;
}

/// Expects `fn` to throw ValueError whose message contains every one of `parts`.
template <typename Fn>
void expect_value_error(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no ValueError was thrown";
  } catch (const ValueError& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << part << "' is not in: " << e.what();
    }
  }
}

}  // namespace weft::data::testing
