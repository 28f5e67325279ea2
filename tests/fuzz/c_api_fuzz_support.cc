// c_api_fuzz: the byte reader, value pools, size checks and the table of live handles.
#include "tests/fuzz/c_api_fuzz_support.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/dtype.h"
#include "ops/op.h"

namespace weft::fuzz::capi {

int g_live_tensors = 0;
int g_live_user_data = 0;

void fail(const char* call, const char* what) {
  std::fprintf(stderr, "c_api_fuzz: %s: %s (last error: '%s')\n", call, what, weft_last_error());
  __builtin_trap();
}

void expect(int rc, const char* call) {
  if (rc == 0) return;
  if (rc != -1) fail(call, "returned neither 0 nor -1");
  const char* message = weft_last_error();
  if (message == nullptr || message[0] == '\0') fail(call, "failed with an empty weft_last_error");
}

// ---- values -----------------------------------------------------------------------------------

std::string Program::text(size_t max) {
  const size_t n = std::min<size_t>({max, u8() * size_t{4}, size_ - std::min(pos_, size_)});
  std::string out(reinterpret_cast<const char*>(data_) + pos_, n);
  pos_ += n;
  return out;
}

int Program::ndim() {
  const uint8_t b = u8();
  if (b == 255) return INT_MIN;
  if (b == 254) return -1;
  if (b >= 200) return 33 + b % 8;  // past weft's 32, still backed by kShapeCapacity entries
  return b % 5;
}

int64_t Program::dim() {
  static const int64_t kDims[] = {
      2,  3,         1,         0, 4,       5,         8,         16,        7,         64,  -1,
      -7, INT64_MIN, INT64_MAX, 1, 1 << 20, 1LL << 31, 1LL << 40, 1LL << 56, 1LL << 57, 1000};
  return pick(kDims);
}

int Program::dtype() {
  const uint8_t b = u8();
  if (b == 255) return INT_MIN;
  if (b >= 240) return static_cast<int>(b % 4) + 13;  // 13 .. 16: past the last code
  if (b >= 230) return -1;
  return b % 4 == 0 ? 0 : b % 13;
}

weft_device_t Program::device() {
  static const weft_device_t kDevices[] = {
      {1, 0}, {1, 0}, {1, 1},  {1, -1}, {2, 0},    {2, 7},  {2, 5000},
      {0, 0}, {3, 0}, {-1, 0}, {13, 0}, {1, 1024}, {2, -1}, {INT32_MAX, INT32_MIN}};
  return pick(kDevices);
}

const char* value_text(uint8_t index) {
  static const char* const kValues[] = {"relu",
                                        "2",
                                        "1",
                                        "0",
                                        "(2, 3)",
                                        "(0, -1)",
                                        "True",
                                        "float32",
                                        "-1",
                                        "3",
                                        "4",
                                        "(1, 1)",
                                        "sigmoid",
                                        "tanh",
                                        "0.5",
                                        "()",
                                        "(-1,)",
                                        "false",
                                        "int8",
                                        "none",
                                        "bogus",
                                        "(3, -2)",
                                        "1e40",
                                        "nan",
                                        "",
                                        "(2,",
                                        "2147483648",
                                        "99999999999999999999",
                                        "-9223372036854775808",
                                        "(1, 2, 3, 4, 5, 6, 7, 8, 9)",
                                        "(0,)",
                                        "float64",
                                        " 7 ",
                                        "(1 << 40)",
                                        "inf",
                                        "-0",
                                        "0x10",
                                        "(16, 16)"};
  return kValues[index % std::size(kValues)];
}

Bytes array_bytes(const int64_t* shape, int ndim, int dtype) {
  static const size_t kSizes[] = {4, 8, 2, 1, 4, 1, 8, 1, 2, 2, 4, 8, 2};
  Bytes out;
  if (ndim < 0 || ndim > 32 || (ndim > 0 && shape == nullptr)) return out;
  if (dtype < 0 || dtype >= static_cast<int>(std::size(kSizes))) return out;
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] < 0) return out;
    if (shape[i] == 0) n = 0;
  }
  if (n != 0) {
    for (int i = 0; i < ndim; ++i) {
      if (__builtin_mul_overflow(n, shape[i], &n) || n > kMaxElements) return out;
    }
  }
  out.valid = true;
  out.bytes = static_cast<size_t>(n) * kSizes[dtype];
  return out;
}

bool invoke_too_big(const std::string& op_name, const weft_array_t* inputs, int num_inputs,
                    const char* const* keys, const char* const* values, int num_attrs) {
  try {
    const Op* op = OpRegistry::global().find(op_name);
    if (op == nullptr) return false;
    AttrMap dict;
    for (int i = 0; i < num_attrs; ++i) {
      if (keys[i] == nullptr || values[i] == nullptr) return false;
      dict[keys[i]] = values[i];
    }
    const OpAttrs attrs = op->make_attrs(std::move(dict));
    if (op->num_inputs(attrs) != num_inputs) return false;
    std::vector<Shape> in(num_inputs);
    std::vector<DType> in_types(num_inputs);
    for (int i = 0; i < num_inputs; ++i) {
      const int64_t* shape = nullptr;
      int ndim = 0, dtype = 0;
      if (weft_array_shape(inputs[i], &shape, &ndim) != 0) return false;
      if (weft_array_dtype(inputs[i], &dtype) != 0) return false;
      in[i] = Shape(shape, shape + ndim);
      in_types[i] = static_cast<DType>(dtype);
    }
    const int num_outputs = op->num_outputs(attrs);
    if (num_outputs > 1024) return false;  // weft must refuse or bound it (not this check)
    std::vector<Shape> out(num_outputs);
    op->infer_shape(attrs, in, out);
    size_t total = 0;
    for (const Shape& s : out) {
      if (!s.known()) return false;
      total += shape_bytes(s, 8, "fuzz");
      if (total > kBudget) return true;
    }
    return false;
  } catch (const std::exception&) {
    return false;
  }
}

// ---- handles ----------------------------------------------------------------------------------

weft_array_t State::array_or_null(Program& p) {
  const uint8_t b = p.u8();
  if (arrays.empty() || b == 255) return nullptr;
  return arrays[b % arrays.size()];
}

void State::add_array(weft_array_t a) {
  if (arrays.size() >= kMaxArrays) {
    expect(weft_array_free(a), "weft_array_free");
    return;
  }
  arrays.push_back(a);
}

void State::free_array(weft_array_t a) {
  arrays.erase(std::find(arrays.begin(), arrays.end(), a));
  expect(weft_array_free(a), "weft_array_free");
  if (freed_arrays.size() < kMaxArrays) freed_arrays.push_back(a);
}

size_t State::nbytes(weft_array_t a) const {
  const int64_t* shape = nullptr;
  int ndim = 0, dtype = 0;
  expect(weft_array_shape(a, &shape, &ndim), "weft_array_shape");
  expect(weft_array_dtype(a, &dtype), "weft_array_dtype");
  const Bytes b = array_bytes(shape, ndim, dtype);
  if (!b.valid) fail("weft_array_shape", "a live array with an invalid shape or dtype");
  return b.bytes;
}

void State::finish() {
  // Errors of the input's operations are expected; the wait must still return 0 or -1.
  expect(weft_wait_all(), "weft_wait_all");
  for (weft_executor_t e : executors) expect(weft_executor_free(e), "weft_executor_free");
  for (weft_graph_t g : graphs) expect(weft_graph_free(g), "weft_graph_free");
  for (weft_array_t a : arrays) expect(weft_array_free(a), "weft_array_free");
  for (DLManagedTensor* t : exports) t->deleter(t);
  for (DLManagedTensorVersioned* t : exports_versioned) t->deleter(t);
  expect(weft_wait_all(), "weft_wait_all");
  for (weft_var_t v : vars) expect(weft_var_delete(v), "weft_var_delete");
  expect(weft_wait_all(), "weft_wait_all");
  release_kept(*this);
  if (weft_wait_all() != 0) fail("weft_wait_all", "a second wait reported an error again");
  expect(weft_autograd_set_recording(0, nullptr), "weft_autograd_set_recording");
  expect(weft_autograd_set_training(0, nullptr), "weft_autograd_set_training");
  if (g_live_tensors != 0) fail("weft_array_from_dlpack", "an imported tensor's deleter never ran");
  if (g_live_user_data != 0) fail("weft_push_sync/async", "user data was never freed");
}

}  // namespace weft::fuzz::capi
