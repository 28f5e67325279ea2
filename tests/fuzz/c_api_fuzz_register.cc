// c_api_fuzz: weft_register_op with fuzzed definitions, and the callbacks of the operators it
// registers (their behaviour, chosen per definition, includes every way of failing).
#include <cstring>
#include <string>

#include "tests/fuzz/c_api_fuzz_support.h"

namespace weft::fuzz::capi {
namespace {

// How a registered operator's callbacks behave; `user` points at one of these (static: it must
// live as long as the process).
struct Behaviour {
  int shape = 0;    // 0 like input 0, 1 error, 2 no message, 3 rank 9, 4 negative, 5 "shp", 6 2^40
  int type = 0;     // 0 like input 0, 1 error, 2 code 99
  int compute = 0;  // 0 zeros, 1 error, 2 no message, 3 reads attributes
  int workspace = 0;  // 0 64 bytes, 1 error, 2 2^41 bytes
};
constexpr int kBehaviours = 7 * 3 * 4 * 3;
Behaviour g_behaviours[kBehaviours];

const Behaviour& behaviour(void* user) { return *static_cast<const Behaviour*>(user); }

int infer_shape(const weft_attrs_t* attrs, int num_inputs, const int64_t* const* in_shapes,
                const int* in_ndims, int num_outputs, int64_t* out_shapes, int* out_ndims,
                void* user) {
  const Behaviour& b = behaviour(user);
  for (int o = 0; o < num_outputs; ++o) {
    int64_t* dims = out_shapes + static_cast<size_t>(o) * WEFT_MAX_NDIM;
    switch (b.shape) {
      case 1:
        return weft_set_error("fuzz infer_shape refuses");
      case 2:
        return 3;
      case 3:
        out_ndims[o] = WEFT_MAX_NDIM + 1;
        break;
      case 4:
        out_ndims[o] = 2;
        dims[0] = 2;
        dims[1] = -5;
        break;
      case 5: {
        int ndim = 0;
        const int rc = weft_attrs_get_shape(attrs, "shp", dims, WEFT_MAX_NDIM, &ndim);
        expect(rc, "weft_attrs_get_shape");
        if (rc != 0) return rc;
        out_ndims[o] = ndim;
        break;
      }
      case 6:
        out_ndims[o] = 2;
        dims[0] = int64_t{1} << 40;
        dims[1] = 3;
        break;
      default:
        if (num_inputs == 0) {
          out_ndims[o] = 1;
          dims[0] = 3;
        } else {
          out_ndims[o] = in_ndims[0];
          for (int k = 0; k < in_ndims[0] && k < WEFT_MAX_NDIM; ++k) dims[k] = in_shapes[0][k];
          if (in_ndims[0] > WEFT_MAX_NDIM) return weft_set_error("fuzz infer_shape: rank > 8");
        }
    }
  }
  return 0;
}

int infer_type(const weft_attrs_t*, int num_inputs, const int* in_types, int num_outputs,
               int* out_types, void* user) {
  const Behaviour& b = behaviour(user);
  if (b.type == 1) return weft_set_error("fuzz infer_type refuses");
  for (int o = 0; o < num_outputs; ++o) {
    out_types[o] = b.type == 2 ? 99 : num_inputs > 0 ? in_types[0] : WEFT_FLOAT32;
  }
  return 0;
}

int workspace_size(const weft_attrs_t*, int, const int64_t* const*, const int*, size_t* bytes,
                   void* user) {
  const Behaviour& b = behaviour(user);
  if (b.workspace == 1) return weft_set_error("fuzz workspace_size refuses");
  *bytes = b.workspace == 2 ? size_t{1} << 41 : 64;
  return 0;
}

// Zeros every output the kernel should write.
void zero_outputs(const weft_op_call_t* call) {
  for (int o = 0; o < call->num_outputs; ++o) {
    const DLTensor& t = call->outputs[o];
    if (call->req[o] == WEFT_REQ_NULL || t.data == nullptr) continue;
    size_t n = (t.dtype.bits * t.dtype.lanes + 7) / 8;
    for (int k = 0; k < t.ndim; ++k) n *= static_cast<size_t>(t.shape[k]);
    std::memset(t.data, 0, n);
  }
}

// Reads attributes the way a kernel would; each getter succeeds or fails with a message.
void read_attrs(const weft_op_call_t* call) {
  const char* str = nullptr;
  int64_t i = 0;
  double f = 0;
  int64_t dims[4];
  int ndim = 0;
  weft_run_context_t ctx{};
  expect(weft_attrs_get_string(call->attrs, "s", &str), "weft_attrs_get_string");
  expect(weft_attrs_get_int(call->attrs, "n", &i), "weft_attrs_get_int");
  expect(weft_attrs_get_float(call->attrs, "x", &f), "weft_attrs_get_float");
  expect(weft_attrs_get_shape(call->attrs, "shp", dims, 4, &ndim), "weft_attrs_get_shape");
  expect(weft_attrs_get_shape(call->attrs, "shp", nullptr, 0, &ndim), "weft_attrs_get_shape");
  expect(weft_attrs_get_int(call->attrs, "no such key", &i), "weft_attrs_get_int");
  expect(weft_attrs_get_int(nullptr, "n", &i), "weft_attrs_get_int");
  expect(weft_current_context(&ctx), "weft_current_context");
}

int compute(const weft_op_call_t* call, void* user) {
  const Behaviour& b = behaviour(user);
  if (b.compute == 1) return weft_set_error("fuzz compute refuses");
  if (b.compute == 2) return 7;
  if (b.compute == 3) read_attrs(call);
  zero_outputs(call);
  return 0;
}

void compute_async(const weft_op_call_t* call, weft_completion_t done, void* user) {
  const Behaviour& b = behaviour(user);
  if (b.compute == 3) read_attrs(call);
  zero_outputs(call);
  const int rc =
      weft_complete(done, b.compute == 1 || b.compute == 2 ? "fuzz kernel refuses" : nullptr);
  expect(rc, "weft_complete");
  if (rc != 0) fail("weft_complete", "the first completion failed");
  // A second completion of the same operation must fail and release nothing.
  if (weft_complete(done, nullptr) != -1) fail("weft_complete", "a second completion succeeded");
  expect(-1, "weft_complete");
}

const char* const kTypes[] = {"int",   "float", "bool", "string", "shape",
                              "dtype", "Int",   "",     "list"};
const char* const kAttrNames[] = {"n", "s", "shp", "x", "flag", "dt", "", "n"};
const char* const kNames[] = {"data", "lhs", "rhs", "weight", "out", ""};

}  // namespace

void do_register(Program& p, State& s) {
  if (s.registrations >= 3) return;  // per input: the registry never shrinks
  ++s.registrations;
  static bool init = false;
  if (!init) {
    for (int i = 0; i < kBehaviours; ++i) {
      g_behaviours[i] = Behaviour{i % 7, i / 7 % 3, i / 21 % 4, i / 84 % 3};
    }
    init = true;
  }
  // Unique names while the process has registered fewer than kMaxRegistered (then a taken one).
  static int counter = 0;
  constexpr int kMaxRegistered = 4000;
  const std::string unique =
      counter < kMaxRegistered ? "fuzz_op_" + std::to_string(counter) : "elemwise_add";
  const std::string long_name(300, 'a');
  const char* const names[] = {unique.c_str(), unique.c_str(), unique.c_str(),   nullptr, "",
                               "bad name!",    "Activation",   long_name.c_str()};
  weft_op_def d{};
  const uint8_t size_choice = p.u8() % 8;
  d.struct_size = size_choice == 1 ? 0 : size_choice == 2 ? sizeof d + 8 : sizeof d;
  d.name = p.pick(names);
  d.description = p.u8() % 2 ? "a fuzzed operator" : nullptr;
  static const int kArity[] = {1, 2, 0, 3, -1, 65, 64, 1000};
  d.num_inputs = p.pick(kArity);
  d.num_outputs = p.pick(kArity);
  // Name lists: backed for any count weft accepts (at most 64).
  const char* input_names[128] = {};
  const char* output_names[128] = {};
  const uint8_t names_choice = p.u8() % 4;
  const uint8_t name_shift = p.u8();
  for (int i = 0; i < 128; ++i) {
    input_names[i] = names_choice == 2 && i == 1 ? nullptr : kNames[(i + name_shift) % 6];
    output_names[i] = names_choice == 3 && i == 0 ? nullptr : "output";
  }
  d.input_names = names_choice == 0 ? nullptr : input_names;
  d.output_names = names_choice == 1 ? nullptr : output_names;
  // Attribute schema: up to 4 fuzzed entries, backed by 260 (weft accepts up to 256).
  static weft_attr_def attrs[260];
  std::memset(attrs, 0, sizeof attrs);
  for (int i = 0; i < 4; ++i) {
    const uint8_t n = p.u8();
    attrs[i].name = n == 255 ? nullptr : kAttrNames[n % std::size(kAttrNames)];
    const uint8_t t = p.u8();
    attrs[i].type = t == 255 ? nullptr : kTypes[t % std::size(kTypes)];
    const uint8_t v = p.u8();
    attrs[i].default_value = v % 3 == 0 ? nullptr : value_text(v);
    attrs[i].description = nullptr;
  }
  static const int kNumAttrs[] = {0, 1, 2, 3, 4, -1, 257, 0};
  d.num_attrs = p.pick(kNumAttrs);
  d.attrs = p.u8() == 255 ? nullptr : attrs;
  d.kind = p.count(4);  // -1 .. 3
  static const uint32_t kMasks[] = {0, 1, 0, 2, 3, 4, 0xff, 1};
  d.devices = p.pick(kMasks);
  const uint8_t fns = p.u8();
  d.infer_shape = fns & 1 ? nullptr : infer_shape;
  d.infer_type = fns & 2 ? infer_type : nullptr;
  d.workspace_size = fns & 4 ? nullptr : workspace_size;
  d.compute = fns & 8 ? nullptr : compute;
  d.compute_async = fns & 16 ? nullptr : compute_async;
  const uint8_t grad = p.u8() % 5;
  d.gradient = grad == 1                     ? "elemwise_add"
               : grad == 2                   ? "no_such_gradient"
               : grad == 3 && !s.ops.empty() ? s.ops.back().c_str()
                                             : nullptr;
  d.user = &g_behaviours[(p.u8() + 256 * p.u8()) % kBehaviours];
  const int rc = weft_register_op(&d);
  expect(rc, "weft_register_op");
  if (rc == 0) {
    if (d.name != unique.c_str()) fail("weft_register_op", "a taken or malformed name accepted");
    ++counter;
    s.ops.push_back(unique);
  }
}

}  // namespace weft::fuzz::capi
