// Request and response bodies (see codec.h).
#include "serve/codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "graph/json_parse.h"
#include "ndarray/io.h"

namespace weft::serve {

HostTensor decode_npy(std::string_view body, const std::string& what) {
  // The library's reader checks the magic, header, dtype, shape limits and length.
  NDArray a = load_npy_array_from_memory(body.data(), body.size(), what);
  WEFT_CHECK(a.dtype() == DType::kFloat32)
      << what << ": dtype " << dtype_name(a.dtype()) << " is not accepted, send float32 ('<f4')";
  WEFT_CHECK(a.ndim() >= 1) << what << ": a 0-d array has no batch dimension";
  HostTensor t;
  t.shape = a.shape();
  t.data = a.to_vector<float>();
  return t;
}

std::string encode_npy(const HostTensor& t) {
  std::string dims;
  for (int d = 0; d < t.shape.ndim(); ++d) {
    dims += std::to_string(t.shape[d]);
    if (t.shape.ndim() == 1)
      dims += ",";  // "(2,)"
    else if (d + 1 < t.shape.ndim())
      dims += ", ";
  }
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + header length (2) + dict + padding + '\n', a multiple of 64.
  size_t header = dict.size() + 1;
  const size_t total = (10 + header + 63) / 64 * 64;
  dict.append(total - 10 - header, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(dict.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  out += dict;
  const size_t bytes = t.data.size() * sizeof(float);
  const size_t at = out.size();
  out.resize(at + bytes);
  if (bytes) std::memcpy(out.data() + at, t.data.data(), bytes);
  return out;
}

namespace {

// "inputs.data[1][0]": `what` and the indices of the elements being visited.
std::string path_of(const std::string& what, const std::vector<size_t>& at) {
  std::string path = what;
  for (size_t i : at) path += "[" + std::to_string(i) + "]";
  return path;
}

// Walks a nested list: the first path through element 0 fixes the shape, every other element
// must match it. `at` holds the index at each level above `v`; its size is the depth of `v`,
// at most kMaxJsonTensorRank, so the recursion is bounded. Messages (and their paths) are only
// built when a check fails (WEFT_CHECK streams nothing otherwise).
void collect(const nlohmann::json& v, const std::string& what, std::vector<size_t>& at,
             std::vector<int64_t>& dims, std::vector<float>& out) {
  const size_t depth = at.size();
  if (v.is_array()) {
    if (depth == dims.size()) {
      WEFT_CHECK(out.empty()) << path_of(what, at)
                              << ": a list where a number was expected (ragged nesting)";
      WEFT_CHECK(!v.empty()) << path_of(what, at)
                             << ": an empty list (every dimension must be at least 1)";
      WEFT_CHECK(depth < static_cast<size_t>(kMaxJsonTensorRank))
          << path_of(what, at) << ": lists nested deeper than " << kMaxJsonTensorRank
          << " levels (the limit on a tensor's dimensions)";
      dims.push_back(static_cast<int64_t>(v.size()));
    }
    WEFT_CHECK(static_cast<int64_t>(v.size()) == dims[depth])
        << path_of(what, at) << ": " << v.size() << " elements where " << dims[depth]
        << " were expected (ragged nesting)";
    at.push_back(0);
    for (size_t i = 0; i < v.size(); ++i) {
      at.back() = i;
      collect(v[i], what, at, dims, out);
    }
    at.pop_back();
    return;
  }
  WEFT_CHECK(v.is_number()) << path_of(what, at) << ": " << v.type_name()
                            << " where a number was expected";
  WEFT_CHECK(depth == dims.size())
      << path_of(what, at) << ": a number where a list was expected (ragged nesting)";
  const double d = v.get<double>();
  WEFT_CHECK(std::abs(d) <= std::numeric_limits<float>::max())
      << path_of(what, at) << ": " << d << " is outside float32's range";
  out.push_back(static_cast<float>(d));
}

nlohmann::json nested(const HostTensor& t, int dim, size_t& at) {
  nlohmann::json list = nlohmann::json::array();
  for (int64_t i = 0; i < t.shape[dim]; ++i) {
    if (dim + 1 == t.shape.ndim()) {
      list.push_back(t.data[at++]);
    } else {
      list.push_back(nested(t, dim + 1, at));
    }
  }
  return list;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The value of parameter `key` in a header like `form-data; name="data"; filename="x.npy"`.
std::optional<std::string> header_param(std::string_view header, std::string_view key) {
  size_t pos = 0;
  while (pos < header.size()) {
    size_t semi = header.find(';', pos);
    if (semi == std::string_view::npos) semi = header.size();
    const std::string item = trim(header.substr(pos, semi - pos));
    const size_t eq = item.find('=');
    if (eq != std::string::npos && lower(trim(item.substr(0, eq))) == key) {
      std::string value = trim(std::string_view(item).substr(eq + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
        value = value.substr(1, value.size() - 2);
      }
      return value;
    }
    pos = semi + 1;
  }
  return std::nullopt;
}

}  // namespace

nlohmann::json parse_json_body(std::string_view text, int max_depth) {
  // nlohmann's parser and destructor do not recurse (3.11), but every walk over the value
  // would; a scan of the text bounds the nesting before anything is built.
  const size_t past = graph::detail::find_nesting_past(text, max_depth);
  WEFT_CHECK(past == std::string_view::npos)
      << "the JSON body nests deeper than " << max_depth << " levels (the limit), at byte " << past;
  return nlohmann::json::parse(text);
}

HostTensor json_to_tensor(const nlohmann::json& value, const std::string& what) {
  WEFT_CHECK(value.is_array()) << what << ": expected a nested list of numbers, got "
                               << value.type_name();
  std::vector<int64_t> dims;
  std::vector<size_t> at;
  HostTensor t;
  collect(value, what, at, dims, t.data);
  t.shape = Shape(dims);
  return t;
}

nlohmann::json tensor_to_json(const HostTensor& t) {
  size_t at = 0;
  if (t.shape.ndim() == 0) return t.data.empty() ? nlohmann::json() : nlohmann::json(t.data[0]);
  return nested(t, 0, at);
}

std::optional<std::string> multipart_boundary(std::string_view content_type) {
  const size_t semi = content_type.find(';');
  if (lower(trim(content_type.substr(0, semi))) != "multipart/form-data") return std::nullopt;
  if (semi == std::string_view::npos) return std::nullopt;
  auto b = header_param(content_type.substr(semi + 1), "boundary");
  if (!b || b->empty() || b->size() > 200) return std::nullopt;
  return b;
}

std::vector<Part> parse_multipart(std::string_view body, std::string_view boundary) {
  const std::string delim = "--" + std::string(boundary);
  std::vector<Part> parts;
  size_t pos = body.find(delim);
  WEFT_CHECK(pos != std::string_view::npos)
      << "multipart body: the boundary '" << boundary << "' does not occur";
  while (true) {
    pos += delim.size();
    if (body.substr(pos, 2) == "--") break;  // the closing delimiter
    WEFT_CHECK(body.substr(pos, 2) == "\r\n")
        << "multipart body: part " << parts.size() << ": no CRLF after the boundary";
    pos += 2;
    const size_t headers_end = body.find("\r\n\r\n", pos);
    WEFT_CHECK(headers_end != std::string_view::npos)
        << "multipart body: part " << parts.size() << " has no end of headers";
    Part part;
    std::string_view headers = body.substr(pos, headers_end - pos);
    while (!headers.empty()) {
      size_t eol = headers.find("\r\n");
      std::string_view line = headers.substr(0, eol);
      headers = eol == std::string_view::npos ? std::string_view() : headers.substr(eol + 2);
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string key = lower(trim(line.substr(0, colon)));
      const std::string value = trim(line.substr(colon + 1));
      if (key == "content-disposition") {
        part.name = header_param(value, "name").value_or("");
      } else if (key == "content-type") {
        part.content_type = value;
      }
    }
    WEFT_CHECK(!part.name.empty())
        << "multipart body: part " << parts.size() << " has no Content-Disposition form-data name";
    const size_t data = headers_end + 4;
    const size_t next = body.find("\r\n" + delim, data);
    WEFT_CHECK(next != std::string_view::npos)
        << "multipart body: part '" << part.name << "' is not closed by the boundary (truncated?)";
    part.body = std::string(body.substr(data, next - data));
    parts.push_back(std::move(part));
    pos = next + 2;
  }
  return parts;
}

std::string write_multipart(const std::vector<Part>& parts, std::string_view boundary) {
  std::string out;
  for (const Part& p : parts) {
    out += "--" + std::string(boundary) + "\r\n";
    out += "Content-Disposition: form-data; name=\"" + p.name + "\"; filename=\"" + p.name +
           ".npy\"\r\n";
    if (!p.content_type.empty()) out += "Content-Type: " + p.content_type + "\r\n";
    out += "\r\n";
    out += p.body;
    out += "\r\n";
  }
  out += "--" + std::string(boundary) + "--\r\n";
  return out;
}

}  // namespace weft::serve
