// libFuzzer entry point for `weft serve`'s request bodies: the first byte picks the form (.npy,
// multipart/form-data, JSON nested lists), the rest is the body. Any input must decode or throw
// weft::Error (or, for JSON syntax and number overflow, nlohmann's exceptions, which the router
// answers with 400);
// what decodes must survive the response encoders and decode back to the same tensor.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/error.h"
#include "serve/codec.h"
#include "tests/fuzz/fuzz_runtime.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::fuzz::use_sync_runtime();
  return 0;
}

namespace {

void check_round_trip(const weft::serve::HostTensor& t) {
  const weft::serve::HostTensor back = weft::serve::decode_npy(weft::serve::encode_npy(t), "again");
  if (back.shape != t.shape || back.data.size() != t.data.size()) __builtin_trap();
  for (size_t i = 0; i < t.data.size(); ++i) {
    if (t.data[i] == t.data[i] && back.data[i] != t.data[i]) __builtin_trap();  // NaN aside
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0:
        check_round_trip(weft::serve::decode_npy(body, "fuzz"));
        break;
      case 1: {
        for (const auto& part : weft::serve::parse_multipart(body, "fuzzboundary")) {
          check_round_trip(weft::serve::decode_npy(part.body, "part"));
        }
        break;
      }
      default: {
        const auto j = nlohmann::json::parse(body);
        const weft::serve::HostTensor t = weft::serve::json_to_tensor(j, "inputs.data");
        if (weft::serve::tensor_to_json(t).dump().empty()) __builtin_trap();
        check_round_trip(t);
        break;
      }
    }
  } catch (const weft::Error&) {
  } catch (const nlohmann::json::exception&) {
  }
  return 0;
}
