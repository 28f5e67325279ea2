// The request and response bodies: .npy bytes written by hand (FORMATS.md), nested JSON lists,
// multipart/form-data, and the errors each reader gives.
#include "serve/codec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace weft::serve {
namespace {

// An .npy file as NumPy 1.x writes it for np.save(f, np.array([[1, 2, 3], [4, 5, 6]], 'f4')).
std::string numpy_bytes(const std::string& descr, const std::string& shape,
                        const std::vector<char>& payload) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  out.append(payload.begin(), payload.end());
  return out;
}

std::vector<char> floats(const std::vector<float>& v) {
  std::vector<char> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

TEST(ServeCodec, DecodesNumpyBytes) {
  const HostTensor t = decode_npy(numpy_bytes("<f4", "(2, 3)", floats({1, 2, 3, 4, 5, 6})), "x");
  EXPECT_EQ(t.shape, (Shape{2, 3}));
  EXPECT_EQ(t.data, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(t.rows(), 2);
}

TEST(ServeCodec, EncodesWhatNumpyWrites) {
  HostTensor t;
  t.shape = Shape{2, 3};
  t.data = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(encode_npy(t), numpy_bytes("<f4", "(2, 3)", floats(t.data)));
  t.shape = Shape{6};
  EXPECT_EQ(encode_npy(t), numpy_bytes("<f4", "(6,)", floats(t.data)));
  const HostTensor back = decode_npy(encode_npy(t), "x");
  EXPECT_EQ(back.shape, t.shape);
  EXPECT_EQ(back.data, t.data);
}

TEST(ServeCodec, RejectsOtherDtypesAndBrokenFiles) {
  std::vector<char> eight(16, 0);
  try {
    decode_npy(numpy_bytes("<f8", "(2,)", eight), "input 'data'");
    FAIL() << "float64 accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("input 'data'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("float64"), std::string::npos) << e.what();
  }
  const std::string good = numpy_bytes("<f4", "(2, 3)", floats({1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(decode_npy(good.substr(0, good.size() - 3), "x"), Error);  // truncated payload
  EXPECT_THROW(decode_npy(good.substr(0, 20), "x"), Error);               // truncated header
  EXPECT_THROW(decode_npy("garbage, not an npy file at all", "x"), Error);
  EXPECT_THROW(decode_npy("", "x"), Error);
}

TEST(ServeCodec, NestedJsonLists) {
  const auto j = nlohmann::json::parse("[[1, 2.5, -3], [4, 5, 6]]");
  const HostTensor t = json_to_tensor(j, "inputs.data");
  EXPECT_EQ(t.shape, (Shape{2, 3}));
  EXPECT_EQ(t.data, (std::vector<float>{1, 2.5f, -3, 4, 5, 6}));
  EXPECT_EQ(tensor_to_json(t), j);
}

TEST(ServeCodec, JsonErrorsNameThePath) {
  auto message = [](const char* text) {
    try {
      json_to_tensor(nlohmann::json::parse(text), "inputs.data");
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("[[1, 2], [3]]").find("inputs.data[1]"), std::string::npos);
  EXPECT_NE(message("[[1, 2], [3, \"x\"]]").find("inputs.data[1][1]"), std::string::npos);
  EXPECT_NE(message("[[1, 2], 3]").find("inputs.data[1]"), std::string::npos);
  EXPECT_NE(message("[]").find("empty"), std::string::npos);
  EXPECT_NE(message("{\"a\": 1}").find("nested list"), std::string::npos);
  EXPECT_NE(message("[true]").find("boolean"), std::string::npos);
  EXPECT_NE(message("[1, 1e300]").find("inputs.data[1]: 1e+300 is outside float32's range"),
            std::string::npos)
      << message("[1, 1e300]");
}

TEST(ServeCodec, DeepNestingIsRefusedNamingTheLimit) {
  // 20,000 levels in 40 KB: the decoder once recursed (and built a path) per level.
  const std::string deep = std::string(20000, '[') + "1" + std::string(20000, ']');
  try {
    parse_json_body(deep);
    FAIL() << "accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("deeper than 64 levels"), std::string::npos) << e.what();
  }
  // nlohmann's parser does not recurse: the value can be built, but json_to_tensor must stop.
  const auto value = nlohmann::json::parse(deep);
  try {
    json_to_tensor(value, "inputs.data");
    FAIL() << "accepted";
  } catch (const ValueError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("deeper than 32 levels"), std::string::npos) << m.substr(0, 300);
    std::string path = "inputs.data";
    for (int i = 0; i < 32; ++i) path += "[0]";
    EXPECT_NE(m.find(path + ": lists nested deeper"), std::string::npos) << m.substr(0, 300);
  }
  // 32 dimensions are a tensor; brackets inside strings do not nest.
  const HostTensor t = json_to_tensor(
      nlohmann::json::parse(std::string(32, '[') + "2.5" + std::string(32, ']')), "x");
  EXPECT_EQ(t.shape.ndim(), 32);
  EXPECT_EQ(t.data, std::vector<float>{2.5f});
  EXPECT_EQ(parse_json_body("{\"a\": \"[[[\\\"[[[\"}", 1)["a"], "[[[\"[[[");
  EXPECT_THROW(parse_json_body("[[1]]", 1), ValueError);
  EXPECT_THROW(parse_json_body("{\"inputs\": ", 64), nlohmann::json::parse_error);
}

TEST(ServeCodec, MultipartRoundTripAndBoundary) {
  EXPECT_EQ(multipart_boundary("multipart/form-data; boundary=abc123"), "abc123");
  EXPECT_EQ(multipart_boundary("Multipart/Form-Data; charset=x; boundary=\"q r\""), "q r");
  EXPECT_FALSE(multipart_boundary("multipart/form-data"));
  EXPECT_FALSE(multipart_boundary("application/json"));

  const std::vector<Part> parts = {{"data", "application/x-npy", std::string("\x00\x01\r\n--x", 7)},
                                   {"label", "", "plain"}};
  const std::string body = write_multipart(parts, "BOUNDARY");
  const std::vector<Part> back = parse_multipart(body, "BOUNDARY");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].name, "data");
  EXPECT_EQ(back[0].content_type, "application/x-npy");
  EXPECT_EQ(back[0].body, parts[0].body);
  EXPECT_EQ(back[1].name, "label");
  EXPECT_EQ(back[1].body, "plain");

  // What curl -F writes (a preamble-free body with a filename).
  const std::string curl =
      "--xyz\r\nContent-Disposition: form-data; name=\"data\"; filename=\"x.npy\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\nBYTES\r\n--xyz--\r\n";
  const auto p = parse_multipart(curl, "xyz");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].name, "data");
  EXPECT_EQ(p[0].body, "BYTES");
}

TEST(ServeCodec, MultipartErrors) {
  EXPECT_THROW(parse_multipart("no boundary here", "b"), ValueError);
  EXPECT_THROW(parse_multipart("--b\r\nContent-Type: x\r\n\r\nbody\r\n--b--", "b"),
               ValueError);  // no name
  EXPECT_THROW(parse_multipart("--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nbod", "b"),
               ValueError);  // truncated
  EXPECT_THROW(parse_multipart("--b\r\nContent-Disposition: form-data; name=\"a\"", "b"),
               ValueError);  // no end of headers
}

}  // namespace
}  // namespace weft::serve
