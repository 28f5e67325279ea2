// Where the shared model files are: $WEFT_MODELS_DIR, else ../shared/models beside the checkout.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace weft::testing {

inline std::filesystem::path models_dir() {
  if (const char* env = std::getenv("WEFT_MODELS_DIR"); env && *env) return env;
  return WEFT_MODELS_DIR;
}

/// Skips the current test when the model folder is absent.
#define WEFT_REQUIRE_MODELS()                                                           \
  do {                                                                                  \
    if (!std::filesystem::is_directory(::weft::testing::models_dir()))                  \
      GTEST_SKIP() << "model folder " << ::weft::testing::models_dir() << " is absent"; \
  } while (0)

}  // namespace weft::testing
