// Request and response bodies of the inference endpoint: host tensors (float32, C order) read
// from and written as `.npy` (FORMATS.md), nested JSON lists, and multipart/form-data parts.
// Every reader throws ValueError naming what was wrong and where.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/shape.h"

namespace weft::serve {

/// A float32 array in host memory, batch dimension first.
struct HostTensor {
  Shape shape;
  std::vector<float> data;
  int64_t rows() const { return shape.ndim() > 0 ? shape[0] : 0; }
};

/// Parses a `.npy` body (format 1.0–3.0, little-endian float32, C order). Other dtypes and Fortran
/// order are errors naming them; `what` names the source ("input 'data'").
HostTensor decode_npy(std::string_view body, const std::string& what);
/// A `.npy` (format 1.0) of `t`.
std::string encode_npy(const HostTensor& t);

/// The most dimensions a tensor sent as nested JSON lists may have (`.npy` bodies have the
/// loader's own limit). Also bounds the recursion of json_to_tensor.
inline constexpr int kMaxJsonTensorRank = 32;
/// How deep a JSON request body may nest: `{"inputs": {"NAME": ` and a tensor of
/// kMaxJsonTensorRank dimensions fit with room to spare (graph/json_parse.h's kMaxJsonDepth, 64,
/// for the same reason).
inline constexpr int kMaxJsonBodyDepth = 64;

/// Parses a JSON request body. Nesting deeper than `max_depth` (arrays and objects) is a
/// ValueError naming the limit, found by a scan of the text before any value is built (a
/// 40 KB body can nest 20,000 levels); syntax errors are nlohmann's parse_error. Thread-safe.
nlohmann::json parse_json_body(std::string_view text, int max_depth = kMaxJsonBodyDepth);

/// A rectangular nested list of numbers → tensor (shape from the nesting). Ragged lists, strings,
/// booleans, empty dimensions and more than kMaxJsonTensorRank dimensions are errors naming the
/// path (`what[2][0]`). Recursion is bounded by kMaxJsonTensorRank; the path is built only for
/// the error. Thread-safe.
HostTensor json_to_tensor(const nlohmann::json& value, const std::string& what);
/// The tensor as nested lists.
nlohmann::json tensor_to_json(const HostTensor& t);

/// One multipart/form-data part: its form field name, its Content-Type (may be empty) and body.
struct Part {
  std::string name;
  std::string content_type;
  std::string body;
};
/// The boundary parameter of a `multipart/form-data; boundary=...` Content-Type, if present.
std::optional<std::string> multipart_boundary(std::string_view content_type);
/// Splits a multipart body (RFC 7578); parts need a `Content-Disposition: form-data; name=...`.
std::vector<Part> parse_multipart(std::string_view body, std::string_view boundary);
/// Writes parts with `boundary` (which must not occur in any body).
std::string write_multipart(const std::vector<Part>& parts, std::string_view boundary);

}  // namespace weft::serve
