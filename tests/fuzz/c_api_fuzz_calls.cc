// c_api_fuzz: DLPack export and import, engine pushes and variables, graphs and executors.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"
#include "graph/infer.h"
#include "graph/json.h"
#include "tests/fuzz/c_api_fuzz_support.h"

namespace weft::fuzz::capi {

// A DLPack tensor made by the harness, with the memory its fields point at: shape and strides
// are backed for any ndim up to kShapeCapacity, the data for what the fields describe.
struct OwnedTensor {
  DLManagedTensor managed{};
  DLManagedTensorVersioned versioned{};
  int64_t shape[kShapeCapacity] = {};
  int64_t strides[kShapeCapacity] = {};
  std::vector<uint8_t> data;
  bool deleted = false;
};

namespace {

template <typename Managed>
void delete_owned(Managed* self) {
  auto* t = static_cast<OwnedTensor*>(self->manager_ctx);
  if (t->deleted) fail("DLPack deleter", "ran twice");
  t->deleted = true;
  --g_live_tensors;
  delete t;
}

}  // namespace

void do_export(Program& p, State& s) {
  weft_array_t a = s.array_or_null(p);
  const uint8_t how = p.u8() % 4;
  if (how == 3) {
    // Hand an exported tensor back (its consumer is done with it).
    if (!s.exports.empty()) {
      s.exports.back()->deleter(s.exports.back());
      s.exports.pop_back();
    }
    return;
  }
  if (s.exports.size() + s.exports_versioned.size() >= kMaxExports) return;
  if (how == 0 || how == 2) {
    DLManagedTensor* out = nullptr;
    const int rc = weft_array_to_dlpack(a, p.u8() == 255 ? nullptr : &out);
    expect(rc, "weft_array_to_dlpack");
    if (rc != 0) return;
    if (how == 2) {
      // The round trip: weft takes the tensor back, or leaves it with the harness.
      weft_array_t back = nullptr;
      const int rc2 = weft_array_from_dlpack(out, &back);
      expect(rc2, "weft_array_from_dlpack");
      if (rc2 == 0) {
        s.add_array(back);
        return;
      }
    }
    s.exports.push_back(out);
  } else {
    DLManagedTensorVersioned* out = nullptr;
    const int rc = weft_array_to_dlpack_versioned(a, &out);
    expect(rc, "weft_array_to_dlpack_versioned");
    if (rc == 0) s.exports_versioned.push_back(out);
  }
}

void do_import(Program& p, State& s) {
  auto* t = new OwnedTensor();
  ++g_live_tensors;
  const bool versioned = p.u8() % 2;
  DLTensor& dl = versioned ? t->versioned.dl_tensor : t->managed.dl_tensor;
  const int ndim = p.ndim();
  dl.ndim = ndim;
  for (int i = 0; i < kShapeCapacity; ++i) t->shape[i] = p.dim();
  dl.shape = p.u8() == 255 ? nullptr : t->shape;
  // Strides: none, the compact ones, or fuzzed.
  const uint8_t stride_choice = p.u8() % 4;
  int64_t expected = 1;
  for (int i = std::min(std::max(ndim, 0), kShapeCapacity) - 1; i >= 0; --i) {
    t->strides[i] = stride_choice == 2 ? static_cast<int64_t>(p.u8()) - 2 : expected;
    if (t->shape[i] > 0 && t->shape[i] < (1 << 20) && expected < (int64_t{1} << 40)) {
      expected *= t->shape[i];
    }
  }
  dl.strides = stride_choice == 0 || stride_choice == 3 ? nullptr : t->strides;
  static const uint8_t kCodes[] = {
      kDLFloat,           kDLInt, kDLUInt, kDLFloat, 4 /* kDLBfloat */, 6 /* kDLBool */,
      5 /* kDLComplex */, 200};
  dl.dtype.code = p.pick(kCodes);
  static const uint8_t kBits[] = {32, 64, 16, 8, 1, 0, 7, 128};
  dl.dtype.bits = p.pick(kBits);
  static const uint16_t kLanes[] = {1, 1, 1, 0, 2, 4, 65535};
  dl.dtype.lanes = p.pick(kLanes);
  const weft_device_t device = p.device();
  // Any 32-bit value a C producer may store (an out-of-range one is no DLDeviceType in C++).
  static_assert(sizeof dl.device.device_type == sizeof device.type);
  std::memcpy(&dl.device.device_type, &device.type, sizeof device.type);
  dl.device.device_id = device.id;
  dl.byte_offset = p.u8() % 4 == 1 ? p.u8() % 16 : 0;
  // Data: as many bytes as the fields describe (8 per element covers every dtype), past the
  // byte offset; NULL when that would be too large, on request, or for a non-CPU device (whose
  // memory the harness cannot provide).
  size_t elements = 1;
  bool small = ndim >= 0 && ndim <= kShapeCapacity && dl.shape != nullptr;
  for (int i = 0; small && i < ndim; ++i) {
    if (t->shape[i] < 0 || t->shape[i] > static_cast<int64_t>(kBudget)) small = false;
    if (small && __builtin_mul_overflow(elements, static_cast<size_t>(t->shape[i]), &elements)) {
      small = false;
    }
  }
  small = small && elements <= kBudget / 8 && device.type == kDLCPU && p.u8() != 255;
  if (small) {
    t->data.assign(elements * 8 + dl.byte_offset + 8, 0);
    dl.data = t->data.data();
  } else {
    dl.data = nullptr;
  }
  weft_array_t out = nullptr;
  int rc;
  if (versioned) {
    t->versioned.version.major = p.u8() % 5 == 1 ? 2 : 1;
    t->versioned.version.minor = p.u8() % 3;
    t->versioned.flags = p.u8() % 4;
    t->versioned.manager_ctx = t;
    t->versioned.deleter = delete_owned<DLManagedTensorVersioned>;
    rc = weft_array_from_dlpack_versioned(&t->versioned, &out);
    expect(rc, "weft_array_from_dlpack_versioned");
  } else {
    t->managed.manager_ctx = t;
    // DLPack allows a NULL deleter; the memory must then outlive weft's use of it, so the
    // harness keeps such a tensor until the end of the input (State::kept).
    const bool no_deleter = p.u8() % 8 == 1;
    t->managed.deleter = no_deleter ? nullptr : delete_owned<DLManagedTensor>;
    rc = weft_array_from_dlpack(&t->managed, &out);
    expect(rc, "weft_array_from_dlpack");
    if (rc == 0 && no_deleter) {
      --g_live_tensors;  // handed over; nothing will call back
      s.kept.push_back(t);
      s.add_array(out);
      return;
    }
  }
  if (rc != 0) {
    if (out != nullptr) fail("weft_array_from_dlpack", "failed but set a handle");
    --g_live_tensors;  // ownership stays with the caller on failure
    delete t;
    return;
  }
  s.add_array(out);
}

// ---- engine -----------------------------------------------------------------------------------

namespace {

struct UserData {
  int mode = 0;  // 0 succeed, 1 error, 2 no message, 3 current context
};

void free_user(void* user) {
  --g_live_user_data;
  delete static_cast<UserData*>(user);
}

int sync_fn(const weft_run_context_t*, void* user) {
  const UserData& u = *static_cast<UserData*>(user);
  if (u.mode == 1) return weft_set_error("fuzz operation refuses");
  if (u.mode == 2) return 5;
  if (u.mode == 3) {
    weft_run_context_t ctx{};
    const int rc = weft_current_context(&ctx);
    expect(rc, "weft_current_context");
    if (rc != 0) fail("weft_current_context", "failed inside an operation");
  }
  return 0;
}

void async_fn(const weft_run_context_t*, weft_completion_t done, void* user) {
  const UserData& u = *static_cast<UserData*>(user);
  const int rc = weft_complete(done, u.mode == 1 ? "fuzz async operation refuses" : nullptr);
  expect(rc, "weft_complete");
  if (u.mode == 2 && weft_complete(done, nullptr) != -1) {
    fail("weft_complete", "a second completion succeeded");
  }
}

// A list of variables: the harness's own, live arrays', and null ones.
size_t var_list(Program& p, State& s, weft_var_t* out, size_t capacity) {
  const size_t n = p.u8() % (capacity + 1);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t b = p.u8();
    out[i] = weft_var_t{};
    if (b % 4 == 0 && !s.vars.empty()) {
      out[i] = s.vars[b / 4 % s.vars.size()];
    } else if (b % 4 != 3 && !s.arrays.empty()) {
      expect(weft_array_var(s.arrays[b / 4 % s.arrays.size()], &out[i]), "weft_array_var");
    }
  }
  return n;
}

}  // namespace

void release_kept(State& s) {
  for (OwnedTensor* t : s.kept) delete t;
  s.kept.clear();
}

void do_push(Program& p, State& s) {
  const bool async = p.u8() % 2;
  weft_var_t reads[8], writes[8];
  const size_t num_reads = var_list(p, s, reads, 8);
  const size_t num_writes = var_list(p, s, writes, 8);
  const uint8_t lists = p.u8() % 8;
  // NULL lists, with their counts (weft must not read them), or a huge count with NULL.
  const weft_var_t* r = lists == 1 ? nullptr : reads;
  const weft_var_t* w = lists == 2 ? nullptr : writes;
  const size_t nr = lists == 3 ? SIZE_MAX : num_reads;
  const weft_device_t device = p.device();
  const int priority = static_cast<int>(p.u8()) - 128;
  const char* name = p.u8() % 2 ? "fuzz_push" : nullptr;
  auto* user = new UserData{p.u8() % 4};
  ++g_live_user_data;
  const bool null_fn = p.u8() == 255;
  if (lists == 3) r = nullptr;
  int rc;
  if (async) {
    rc = weft_push_async(null_fn ? nullptr : async_fn, user, free_user, device, r, nr, w,
                         num_writes, priority, name);
  } else {
    rc = weft_push_sync(null_fn ? nullptr : sync_fn, user, free_user, device, r, nr, w, num_writes,
                        priority, name);
  }
  expect(rc, async ? "weft_push_async" : "weft_push_sync");
}

void do_vars(Program& p, State& s) {
  switch (p.u8() % 5) {
    case 0: {
      if (s.vars.size() >= kMaxVars) return;
      weft_var_t v{};
      const int rc = weft_var_new(&v);
      expect(rc, "weft_var_new");
      if (rc == 0) s.vars.push_back(v);
      break;
    }
    case 1: {
      if (s.vars.empty()) {
        expect(weft_var_delete(weft_var_t{}), "weft_var_delete");
        return;
      }
      const size_t i = p.u8() % s.vars.size();
      expect(weft_var_delete(s.vars[i]), "weft_var_delete");
      s.vars.erase(s.vars.begin() + static_cast<ptrdiff_t>(i));
      break;
    }
    case 2: {
      uint64_t version = 0;
      const weft_var_t v = s.vars.empty() ? weft_var_t{} : s.vars[p.u8() % s.vars.size()];
      expect(weft_var_version(v, p.u8() == 255 ? nullptr : &version), "weft_var_version");
      break;
    }
    case 3: {
      weft_var_t v{};
      if (!s.vars.empty() && p.u8() % 2) v = s.vars[p.u8() % s.vars.size()];
      expect(weft_wait_var(v), "weft_wait_var");
      break;
    }
    case 4:
      expect(weft_wait_all(), "weft_wait_all");
      break;
  }
}

// ---- graphs -----------------------------------------------------------------------------------

namespace {

std::string node(const std::string& op, const std::string& name, const std::string& attrs,
                 const std::string& inputs) {
  return R"({"op": ")" + op + R"(", "name": ")" + name + R"(", "attrs": {)" + attrs +
         R"(}, "inputs": [)" + inputs + "]}";
}

std::string attr(const char* key, const char* value) {
  return std::string("\"") + key + "\": \"" + value + "\"";
}

// A small graph: one of a few templates with fuzzed attribute values, or the input's bytes.
std::string graph_json(Program& p, const State& s) {
  const uint8_t which = p.u8() % 6;
  const char* v1 = value_text(p.u8());
  const char* v2 = value_text(p.u8());
  std::string nodes;
  int head = 0;
  switch (which) {
    case 0:  // data -> FullyConnected -> Activation
      nodes = node("null", "data", "", "") + "," + node("null", "fc_weight", "", "") + "," +
              node("null", "fc_bias", "", "") + "," +
              node("FullyConnected", "fc", attr("num_hidden", v1), "[0,0,0],[1,0,0],[2,0,0]") +
              "," + node("Activation", "act", attr("act_type", v2), "[3,0,0]");
      head = 4;
      break;
    case 1:  // a + b
      nodes = node("null", "a", "", "") + "," + node("null", "b", "", "") + "," +
              node("elemwise_add", "add", "", "[0,0,0],[1,0,0]");
      head = 2;
      break;
    case 2:  // Reshape -> sum
      nodes = node("null", "data", "", "") + "," +
              node("Reshape", "r", attr("shape", v1), "[0,0,0]") + "," +
              node("sum", "s", attr("axis", v2), "[1,0,0]");
      head = 2;
      break;
    case 3: {  // an operator this input registered
      const std::string op = s.ops.empty() ? "no_such_op" : s.ops[p.u8() % s.ops.size()];
      nodes = node("null", "data", "", "") + "," + node("null", "lhs", "", "") + "," +
              node(op, "f", attr("n", v1) + "," + attr("shp", v2), "[0,0,0]");
      head = 2;
      break;
    }
    case 4:  // a graph whose variable carries its shape
      nodes = node("null", "x", attr("__shape__", v1), "") + "," + node("relu", "y", "", "[0,0,0]");
      head = 1;
      break;
    default:
      return p.text(512);
  }
  std::string arg_nodes = "0";
  return R"({"nodes": [)" + nodes + R"(], "arg_nodes": [)" + arg_nodes + R"(], "heads": [[)" +
         std::to_string(head) + R"(, 0, 0]], "attrs": {"mxnet_version": ["int", 10500]}})";
}

}  // namespace

void do_graph(Program& p, State& s) {
  if (p.u8() % 4 == 3) {
    if (!s.graphs.empty()) {
      expect(weft_graph_free(s.graphs.back()), "weft_graph_free");
      if (s.freed_graphs.size() < kMaxGraphs) s.freed_graphs.push_back(s.graphs.back());
      s.graphs.pop_back();
      s.graph_texts.pop_back();
    }
    return;
  }
  if (s.graphs.size() >= kMaxGraphs) return;
  const std::string json = graph_json(p, s);
  const uint8_t how = p.u8() % 8;
  weft_graph_t g = nullptr;
  const int rc =
      weft_graph_load_json(how == 1 ? nullptr : json.data(),
                           how == 2 ? json.size() / 2 : json.size(), how == 3 ? nullptr : &g);
  expect(rc, "weft_graph_load_json");
  if (rc == 0) {
    s.graphs.push_back(g);
    s.graph_texts.push_back(json);
  }
}

namespace {

// Whether binding would allocate more than kBudget, by weft's own inference on the same JSON
// (arguments, outputs, and as much again for gradients and the arena). False when inference
// fails: the bind is made and must fail cleanly.
bool bind_too_big(const std::string& json, const graph::InferInputs& in) {
  try {
    const graph::Graph g = graph::load_json(json);
    // Inference holds a shape per entry (an output count can come from an attribute).
    if (g.nodes.size() > 64 || g.num_entries() > 1024) return true;
    const graph::InferResult r = graph::infer_shapes_types(g, in, true);
    size_t total = 0;
    for (const Shape& shape : r.shapes) {
      total += 3 * shape_bytes(shape, 8, "fuzz");
      if (total > kBudget) return true;
    }
    return false;
  } catch (const std::exception&) {
    return false;
  }
}

const char* const kInputNames[] = {"data", "a", "b", "x", "fc_weight", "nope", "lhs"};

}  // namespace

void do_executor(Program& p, State& s) {
  const uint8_t what = p.u8() % 10;
  if (what == 0) {
    if (s.executors.size() >= kMaxExecutors) return;
    const size_t gi = s.graphs.empty() ? 0 : p.u8() % s.graphs.size();
    weft_graph_t g = s.graphs.empty() || p.u8() == 255 ? nullptr : s.graphs[gi];
    const char* names[4];
    int64_t dims[4][kShapeCapacity];
    const int64_t* shapes[4];
    int ndims[4];
    for (int i = 0; i < 4; ++i) {
      const uint8_t n = p.u8();
      names[i] = n == 255 ? nullptr : kInputNames[n % std::size(kInputNames)];
      ndims[i] = p.ndim();
      for (int64_t& d : dims[i]) d = p.dim();
      shapes[i] = p.u8() == 255 ? nullptr : dims[i];
    }
    const int num_inputs = p.count(5);  // -1 .. 4
    // The inputs bind will see, for the size check (only when weft must accept them all).
    graph::InferInputs in;
    bool checkable = true;
    for (int i = 0; i < num_inputs; ++i) {
      const Bytes b = array_bytes(shapes[i], ndims[i], 0);
      if (names[i] == nullptr || !b.valid) {
        checkable = false;
      } else {
        in.shapes[names[i]] = Shape(shapes[i], shapes[i] + ndims[i]);
      }
    }
    const int grad_req = p.count(4);
    const weft_device_t device = p.device();
    if (g != nullptr && checkable && bind_too_big(s.graph_texts[gi], in)) return;
    weft_executor_t e = nullptr;
    const int rc = weft_executor_bind(g, device, names, shapes, ndims, num_inputs, grad_req, &e);
    expect(rc, "weft_executor_bind");
    if (rc == 0) s.executors.push_back(e);
    return;
  }
  weft_executor_t e =
      s.executors.empty() || p.u8() == 255 ? nullptr : s.executors[p.u8() % s.executors.size()];
  const char* name = p.u8() == 255 ? nullptr : kInputNames[p.u8() % std::size(kInputNames)];
  weft_array_t out = nullptr;
  int rc = 0;
  switch (what) {
    case 1:
      expect(weft_executor_forward(e, p.u8() % 2), "weft_executor_forward");
      break;
    case 2: {
      weft_array_t grads[4];
      for (weft_array_t& g : grads) g = s.array_or_null(p);
      const int n = p.count(5);
      expect(weft_executor_backward(e, p.u8() % 2 ? nullptr : grads, n), "weft_executor_backward");
      break;
    }
    case 3: {
      int n = -1;
      expect(weft_executor_num_outputs(e, &n), "weft_executor_num_outputs");
      break;
    }
    case 4:
      rc = weft_executor_output(e, p.count(4), &out);
      expect(rc, "weft_executor_output");
      break;
    case 5:
      rc = weft_executor_arg(e, name, &out);
      expect(rc, "weft_executor_arg");
      break;
    case 6:
      rc = weft_executor_grad(e, name, &out);
      expect(rc, "weft_executor_grad");
      break;
    case 7:
      expect(weft_executor_set_arg(e, name, s.array_or_null(p)), "weft_executor_set_arg");
      break;
    case 8:
      if (e != nullptr) {
        expect(weft_executor_free(e), "weft_executor_free");
        s.executors.erase(std::find(s.executors.begin(), s.executors.end(), e));
      }
      break;
    default:
      expect(weft_executor_free(nullptr), "weft_executor_free");
      break;
  }
  if (rc == 0 && out != nullptr) s.add_array(out);
}

}  // namespace weft::fuzz::capi

namespace weft::fuzz::capi {

namespace {
// A call on a freed handle: it must fail, with a message naming the handle as freed.
void expect_stale(int rc, const char* call) {
  if (rc != -1) fail(call, "a freed handle was accepted");
  if (std::strstr(weft_last_error(), "freed") == nullptr) fail(call, "the message lacks 'freed'");
}
}  // namespace

void do_stale(Program& p, State& s) {
  const uint8_t what = p.u8() % 4;
  if (what < 2 && !s.freed_arrays.empty()) {
    weft_array_t a = s.freed_arrays[p.u8() % s.freed_arrays.size()];
    int dtype = -1;
    if (what == 0) expect_stale(weft_array_dtype(a, &dtype), "weft_array_dtype");
    if (what == 1) expect_stale(weft_array_free(a), "weft_array_free");
  } else if (what >= 2 && !s.freed_graphs.empty()) {
    weft_graph_t g = s.freed_graphs[p.u8() % s.freed_graphs.size()];
    weft_executor_t e = nullptr;
    if (what == 2) {
      expect_stale(weft_executor_bind(g, weft_device_t{1, 0}, nullptr, nullptr, nullptr, 0, 0, &e),
                   "weft_executor_bind");
    }
    if (what == 3) expect_stale(weft_graph_free(g), "weft_graph_free");
  }
}

}  // namespace weft::fuzz::capi
