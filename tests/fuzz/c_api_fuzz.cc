// libFuzzer entry point for the C ABI (include/weft/c_api.h): the input is a little program of
// C ABI calls over a table of live handles, exploring argument values (shapes, dtypes, devices,
// attributes, DLPack fields, operator definitions, variable lists, graph JSON).
//
// Note [C ABI fuzzing contract]
// Every call must return 0, or -1 with a non-empty weft_last_error(); anything else (another
// return code, an empty message, a crash, a sanitizer report, a leak, a user-data or DLPack
// deleter run twice or never) is a finding. The harness passes only pointers the ABI can rely
// on: live handles it owns, NULL, handles it freed (generation-checked: every use must fail,
// Note [Generation-checked handles]), and buffers as large as the counts it passes say. It
// explores values, not the memory-safety violations that the ABI documents as undefined (wild
// pointers into memory weft does not own). Calls that would legitimately allocate more than kBudget
// bytes are skipped, after checking with weft's own inference what they would allocate.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/c_api_fuzz_support.h"

namespace weft::fuzz::capi {
namespace {

// ---- operator invocation ----------------------------------------------------------------------

const char* const kOpNames[] = {
    "elemwise_add", "Activation",   "FullyConnected", "Reshape",      "sum",    "broadcast_add",
    "relu",         "_zeros",       "softmax",        "SliceChannel", "Concat", "transpose",
    "dot",          "_plus_scalar", "Convolution",    "no_such_op",   "",       "elemwise add"};
const char* const kAttrKeys[] = {
    "act_type", "num_hidden", "shape",       "axis",   "keepdims",   "no_bias",    "scalar",
    "num_args", "dim",        "num_outputs", "kernel", "num_filter", "n",          "s",
    "shp",      "dt",         "flag",        "x",      "",           "__hidden__", "bogus"};

void do_invoke(Program& p, State& s) {
  const uint8_t which = p.u8();
  std::string name;
  if (!s.ops.empty() && which % 4 == 3) {
    name = s.ops[p.u8() % s.ops.size()];
  } else {
    name = p.pick(kOpNames);
  }
  const char* op = p.u8() == 255 ? nullptr : name.c_str();
  int num_inputs = p.count(5);  // -1 .. 4
  weft_array_t inputs[8] = {};
  for (int i = 0; i < 8; ++i) inputs[i] = s.array_or_null(p);
  const bool null_inputs = p.u8() == 1;
  int num_attrs = p.count(5);  // -1 .. 4
  const char* keys[8] = {};
  const char* values[8] = {};
  for (int i = 0; i < 4; ++i) {
    const uint8_t k = p.u8();
    keys[i] = k == 255 ? nullptr : kAttrKeys[k % std::size(kAttrKeys)];
    const uint8_t v = p.u8();
    values[i] = v == 255 ? nullptr : value_text(v);
  }
  const bool null_attrs = p.u8() == 1;
  int capacity = 4 - p.count(5);  // 4 .. 0, then 5 (more than the op has: also valid)
  if (capacity == 5) capacity = -1;
  const bool null_outputs = p.u8() == 1;
  int* num_outputs_ptr = p.u8() == 255 ? nullptr : &capacity;
  const int given_capacity = capacity;
  weft_array_t outputs[8] = {};
  if (op != nullptr && num_inputs >= 0 && !null_inputs && num_attrs >= 0 && !null_attrs &&
      invoke_too_big(name, inputs, num_inputs, keys, values, num_attrs)) {
    return;
  }
  const int rc = weft_invoke(op, null_inputs ? nullptr : inputs, num_inputs,
                             null_attrs ? nullptr : keys, null_attrs ? nullptr : values, num_attrs,
                             null_outputs ? nullptr : outputs, num_outputs_ptr);
  expect(rc, "weft_invoke");
  if (rc != 0) return;
  if (capacity < 0 || capacity > given_capacity) fail("weft_invoke", "output count out of range");
  for (int i = 0; i < capacity; ++i) {
    if (outputs[i] == nullptr) fail("weft_invoke", "a NULL output handle");
    s.add_array(outputs[i]);
  }
}

// ---- arrays -----------------------------------------------------------------------------------

void do_create(Program& p, State& s, bool from_host) {
  int64_t dims[kShapeCapacity];
  const int ndim = p.ndim();
  for (int64_t& d : dims) d = p.dim();
  const int64_t* shape = p.u8() == 255 ? nullptr : dims;
  const int dtype = p.dtype();
  const weft_device_t device = p.device();
  const Bytes need = array_bytes(shape, ndim, dtype);
  if (need.valid && need.bytes > kBudget) return;
  weft_array_t out = nullptr;
  int rc;
  if (!from_host) {
    rc = weft_array_zeros(shape, ndim, dtype, device, p.u8() == 255 ? nullptr : &out);
    expect(rc, "weft_array_zeros");
  } else {
    // The byte count given: the right one, or off by a little (the buffer is always as large).
    const size_t base = need.valid ? need.bytes : p.u8();
    const uint8_t delta = p.u8() % 8;
    const size_t given = delta == 1 ? base + 1 : delta == 2 && base > 0 ? base - 1 : base;
    std::vector<uint8_t> host(given + 1);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(i * 7);
    const void* data = delta == 3 ? nullptr : host.data();
    rc = weft_array_from_host(data, given, shape, ndim, dtype, device,
                              p.u8() == 255 ? nullptr : &out);
    expect(rc, "weft_array_from_host");
  }
  if (rc == 0) {
    if (out == nullptr) fail("weft_array_zeros/from_host", "success without a handle");
    s.add_array(out);
  }
}

void do_array_query(Program& p, State& s) {
  weft_array_t a = s.array_or_null(p);
  switch (p.u8() % 12) {
    case 0: {
      const int64_t* shape = nullptr;
      int ndim = -1;
      expect(weft_array_shape(a, &shape, &ndim), "weft_array_shape");
      break;
    }
    case 1: {
      int dtype = -1;
      expect(weft_array_dtype(a, p.u8() == 255 ? nullptr : &dtype), "weft_array_dtype");
      break;
    }
    case 2: {
      weft_device_t d{};
      expect(weft_array_device(a, &d), "weft_array_device");
      break;
    }
    case 3: {
      weft_var_t v{};
      expect(weft_array_var(a, &v), "weft_array_var");
      break;
    }
    case 4: {
      void* data = nullptr;
      expect(weft_array_data(a, &data), "weft_array_data");
      break;
    }
    case 5:
      expect(weft_array_wait_to_read(a), "weft_array_wait_to_read");
      break;
    case 6: {
      // A destination as large as the count given, which is the array's size or off by one.
      size_t bytes = 0;
      if (a != nullptr) bytes = s.nbytes(a);
      const uint8_t delta = p.u8() % 4;
      if (delta == 1) bytes += 1;
      if (delta == 2 && bytes > 0) bytes -= 1;
      if (bytes > kBudget) return;
      std::vector<uint8_t> dst(bytes + 1);
      expect(weft_array_to_host(a, delta == 3 ? nullptr : dst.data(), bytes), "weft_array_to_host");
      break;
    }
    case 7:
      expect(weft_array_copy_to(a, s.array_or_null(p)), "weft_array_copy_to");
      break;
    case 8: {
      int ro = -1;
      expect(weft_array_is_read_only(a, &ro), "weft_array_is_read_only");
      break;
    }
    case 9: {
      weft_array_t out = nullptr;
      const int rc = weft_array_retain(a, &out);
      expect(rc, "weft_array_retain");
      if (rc == 0) s.add_array(out);
      break;
    }
    case 10:
      if (a != nullptr) s.free_array(a);
      break;
    case 11: {
      int exists = -1;
      const char* name = p.pick(kOpNames);
      expect(weft_op_exists(p.u8() == 255 ? nullptr : name, &exists), "weft_op_exists");
      break;
    }
  }
}

void do_autograd(Program& p, State& s) {
  switch (p.u8() % 5) {
    case 0: {
      int previous = -1;
      expect(weft_autograd_set_recording(p.u8() % 2, p.u8() == 255 ? nullptr : &previous),
             "weft_autograd_set_recording");
      break;
    }
    case 1:
      expect(weft_autograd_set_training(p.u8() % 2, nullptr), "weft_autograd_set_training");
      break;
    case 2:
      expect(weft_array_attach_grad(s.array_or_null(p), p.count(4)), "weft_array_attach_grad");
      break;
    case 3: {
      weft_array_t out = nullptr;
      const int rc = weft_array_grad(s.array_or_null(p), &out);
      expect(rc, "weft_array_grad");
      if (rc == 0) s.add_array(out);
      break;
    }
    case 4: {
      weft_array_t head = s.array_or_null(p);
      weft_array_t head_grad = p.u8() % 2 ? nullptr : s.array_or_null(p);
      expect(weft_array_backward(head, head_grad), "weft_array_backward");
      break;
    }
  }
}

}  // namespace
}  // namespace weft::fuzz::capi

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::fuzz::use_sync_runtime();
  return 0;
}

/// Runs the input's program of C ABI calls, then waits and frees everything it made; see
/// Note [C ABI fuzzing contract] for what counts as a finding.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft::fuzz::capi;  // NOLINT(google-build-using-namespace)
  Program p(data, size);
  State s;
  for (int step = 0; step < kMaxSteps && !p.done(); ++step) {
    switch (p.u8() % 13) {
      case 0:
        do_create(p, s, false);
        break;
      case 1:
        do_create(p, s, true);
        break;
      case 2:
        do_array_query(p, s);
        break;
      case 3:
        do_invoke(p, s);
        break;
      case 4:
        do_export(p, s);
        break;
      case 5:
        do_import(p, s);
        break;
      case 6:
        do_register(p, s);
        break;
      case 7:
        do_push(p, s);
        break;
      case 8:
        do_vars(p, s);
        break;
      case 9:
        do_graph(p, s);
        break;
      case 10:
        do_executor(p, s);
        break;
      case 11:
        do_autograd(p, s);
        break;
      case 12:
        do_stale(p, s);
        break;
    }
  }
  s.finish();
  return 0;
}
