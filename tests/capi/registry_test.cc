// Runtime operator registration (C++ API and C ABI) under concurrency, foreign operators in the
// executor (asynchronous kind included) with gradients checked against finite differences,
// read-only arrays, generation-checked handles (use after free, double free, another kind),
// DLPack imports whose extent would wrap the address space, and the header-only weft.hpp wrapper.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "graph/executor.h"
#include "graph/json.h"
#include "ndarray/autograd.h"
#include "ndarray/ndarray.h"
#include "ndarray/runtime.h"
#include "ops/op.h"
#include "weft/c_api.h"
#include "weft/weft.hpp"

namespace weft {
namespace {

// Registers `name` as out = data * k through the C++ API.
const Op& register_scale(const std::string& name, float k) {
  return OpRegistry::register_runtime(name, [k](Op& op) {
    op.set_num_inputs(1).set_num_outputs(1);
    op.set_attr<FInferShape>([](const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
      if (!in[0].known()) return false;
      out[0] = in[0];
      return true;
    });
    op.set_attr(DeviceType::kCPU,
                FCompute([k](const OpAttrs&, const OpContext&, std::span<const TensorView> in,
                             std::span<const OpReq>, std::span<const TensorView> out) {
                  const float* x = in[0].ptr<float>();
                  float* y = out[0].ptr<float>();
                  for (int64_t i = 0; i < in[0].size(); ++i) y[i] = k * x[i];
                }));
  });
}

TEST(RuntimeRegistration, RegistersWhileOtherThreadsInvokeAndLookUp) {
  constexpr int kOps = 64;
  std::atomic<bool> stop{false};
  std::atomic<int> registered{0};
  std::atomic<int64_t> checks{0};
  NDArray x = NDArray::from_vector<float>(Shape{4}, {1, 2, 3, 4});
  // Invokers: built-in ops and every runtime op registered so far, checked against k * x.
  std::vector<std::thread> users;
  for (int t = 0; t < 3; ++t) {
    users.emplace_back([&, t] {
      int round = 0;
      while (!stop.load()) {
        NDArray y = invoke1("elemwise_add", {x, x});
        const int n = registered.load();
        if (n > 0) {
          const int i = (round++ * 7 + t) % n;
          NDArray z = invoke1("rt_scale_" + std::to_string(i), {x});
          const auto v = z.to_vector<float>();
          for (int e = 0; e < 4; ++e) EXPECT_EQ(v[e], static_cast<float>(i + 1) * (e + 1));
        }
        EXPECT_EQ(y.to_vector<float>()[3], 8.0f);
        EXPECT_NE(OpRegistry::global().find("Convolution"), nullptr);
        checks.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < kOps; ++i) {
    const Op& op = register_scale("rt_scale_" + std::to_string(i), static_cast<float>(i + 1));
    EXPECT_EQ(OpRegistry::global().find(op.name()), &op);
    registered.store(i + 1);
    std::this_thread::yield();
  }
  while (checks.load() < 200) std::this_thread::yield();
  stop.store(true);
  for (auto& u : users) u.join();
  // Listed with the built-ins, sorted.
  int listed = 0;
  for (const Op* op : OpRegistry::global().list()) listed += op->name().rfind("rt_scale_", 0) == 0;
  EXPECT_EQ(listed, kOps);
}

TEST(RuntimeRegistration, RefusesTakenAndInvalidNames) {
  EXPECT_THROW(register_scale("Convolution", 1), ValueError);
  EXPECT_THROW(register_scale("", 1), ValueError);
  EXPECT_THROW(register_scale("has space", 1), ValueError);
  register_scale("rt_once", 1);
  try {
    register_scale("rt_once", 2);
    FAIL() << "a second registration of rt_once succeeded";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("already registered"), std::string::npos) << e.what();
  }
  // A definition that throws publishes nothing.
  EXPECT_THROW(OpRegistry::register_runtime(
                   "rt_half", [](Op&) { throw ValueError("the definition is incomplete"); }),
               ValueError);
  EXPECT_EQ(OpRegistry::global().find("rt_half"), nullptr);
  // Close names are suggested for runtime ops too.
  try {
    (void)get_op("rt_onse");
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("rt_once"), std::string::npos) << e.what();
  }
}

// ---- a foreign cube operator through the C ABI: y = x^3, dy/dx = 3 x^2 -------------------------

int same_shape(const weft_attrs_t*, int, const int64_t* const* in, const int* nd, int nout,
               int64_t* out, int* out_nd, void*) {
  for (int o = 0; o < nout; ++o) {
    out_nd[o] = nd[0];
    for (int d = 0; d < nd[0]; ++d) out[o * WEFT_MAX_NDIM + d] = in[0][d];
  }
  return 0;
}

int64_t numel(const DLTensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

int cube(const weft_op_call_t* call, void*) {
  const auto* x = static_cast<const double*>(call->inputs[0].data);
  auto* y = static_cast<double*>(call->outputs[0].data);
  for (int64_t i = 0; i < numel(call->inputs[0]); ++i) y[i] = x[i] * x[i] * x[i];
  return 0;
}

// (out_grad, x, y) -> 3 x^2 out_grad
int cube_grad(const weft_op_call_t* call, void*) {
  const auto* og = static_cast<const double*>(call->inputs[0].data);
  const auto* x = static_cast<const double*>(call->inputs[1].data);
  auto* g = static_cast<double*>(call->outputs[0].data);
  for (int64_t i = 0; i < numel(call->inputs[0]); ++i) {
    const double v = 3 * x[i] * x[i] * og[i];
    g[i] = call->req[0] == WEFT_REQ_ADD ? g[i] + v : v;
  }
  return 0;
}

// Asynchronous sine: completes from a thread of its own.
void async_sin(const weft_op_call_t* call, weft_completion_t done, void*) {
  const auto* x = static_cast<const double*>(call->inputs[0].data);
  auto* y = static_cast<double*>(call->outputs[0].data);
  const int64_t n = numel(call->inputs[0]);
  std::thread([x, y, n, done] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (int64_t i = 0; i < n; ++i) y[i] = std::sin(x[i]);
    weft_complete(done, nullptr);
  }).detach();
}

// (out_grad, x, y) -> cos(x) out_grad: the gradient of the asynchronous sine.
int sin_grad(const weft_op_call_t* call, void*) {
  const auto* og = static_cast<const double*>(call->inputs[0].data);
  const auto* x = static_cast<const double*>(call->inputs[1].data);
  auto* g = static_cast<double*>(call->outputs[0].data);
  for (int64_t i = 0; i < numel(call->inputs[0]); ++i) {
    const double v = std::cos(x[i]) * og[i];
    g[i] = call->req[0] == WEFT_REQ_ADD ? g[i] + v : v;
  }
  return 0;
}

void register_c_ops() {
  static bool done = [] {
    weft_op_def sg{};
    sg.struct_size = sizeof sg;
    sg.name = "cc_sin_grad";
    sg.num_inputs = 3;
    sg.num_outputs = 1;
    sg.infer_shape = same_shape;
    sg.compute = sin_grad;
    EXPECT_EQ(weft_register_op(&sg), 0) << weft_last_error();
    weft_op_def g{};
    g.struct_size = sizeof g;
    g.name = "cc_cube_grad";
    g.num_inputs = 3;
    g.num_outputs = 1;
    g.infer_shape = same_shape;
    g.compute = cube_grad;
    EXPECT_EQ(weft_register_op(&g), 0) << weft_last_error();
    weft_op_def d{};
    d.struct_size = sizeof d;
    d.name = "cc_cube";
    d.num_inputs = 1;
    d.num_outputs = 1;
    d.infer_shape = same_shape;
    d.compute = cube;
    d.gradient = "cc_cube_grad";
    EXPECT_EQ(weft_register_op(&d), 0) << weft_last_error();
    weft_op_def s{};
    s.struct_size = sizeof s;
    s.name = "cc_async_sin";
    s.kind = WEFT_OP_ASYNC;
    s.num_inputs = 1;
    s.num_outputs = 1;
    s.infer_shape = same_shape;
    s.compute_async = async_sin;
    s.gradient = "cc_sin_grad";
    EXPECT_EQ(weft_register_op(&s), 0) << weft_last_error();
    return true;
  }();
  (void)done;
}

// sum(cube(async_sin(x) * w)) in a graph: the executor runs a foreign asynchronous node and a
// foreign node whose gradient is another foreign operator.
constexpr const char* kGraph = R"({
  "nodes": [
    {"op": "null", "name": "x", "inputs": []},
    {"op": "cc_async_sin", "name": "s", "inputs": [[0, 0, 0]]},
    {"op": "null", "name": "w", "inputs": []},
    {"op": "elemwise_mul", "name": "m", "inputs": [[1, 0, 0], [2, 0, 0]]},
    {"op": "cc_cube", "name": "c", "inputs": [[3, 0, 0]]},
    {"op": "sum", "name": "loss", "inputs": [[4, 0, 0]]}
  ],
  "arg_nodes": [0, 2], "heads": [[5, 0, 0]], "attrs": {"mxnet_version": ["int", 10901]}})";

double loss_of(const std::vector<double>& x, const std::vector<double>& w) {
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += std::pow(std::sin(x[i]) * w[i], 3);
  return s;
}

TEST(ForeignOps, GraphWithAsyncAndGradientMatchesFiniteDifferences) {
  register_c_ops();
  auto g = std::make_shared<const graph::Graph>(graph::load_json(kGraph));
  graph::BindOptions opt;
  opt.inputs.shapes["x"] = Shape{2, 3};
  opt.inputs.shapes["w"] = Shape{2, 3};
  opt.inputs.dtypes["x"] = DType::kFloat64;
  opt.inputs.dtypes["w"] = DType::kFloat64;
  opt.default_grad_req = GradReq::kWrite;
  auto exec = graph::Executor::bind(g, opt);
  const std::vector<double> x = {0.1, -0.7, 1.3, 0.4, 2.0, -1.1};
  const std::vector<double> w = {1.5, 0.5, -0.8, 2.0, 0.3, 1.0};
  NDArray xa = exec->arg("x");
  NDArray wa = exec->arg("w");
  NDArray::from_vector<double>(Shape{2, 3}, x).copy_to(xa);
  NDArray::from_vector<double>(Shape{2, 3}, w).copy_to(wa);
  exec->forward(true);
  exec->backward();
  EXPECT_NEAR(exec->outputs()[0].to_vector<double>()[0], loss_of(x, w), 1e-12);
  const auto gx = exec->grad("x").to_vector<double>();
  const auto gw = exec->grad("w").to_vector<double>();
  // Central differences in float64 as the independent reference.
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    auto xp = x, xm = x, wp = w, wm = w;
    xp[i] += h;
    xm[i] -= h;
    wp[i] += h;
    wm[i] -= h;
    const double nx = (loss_of(xp, w) - loss_of(xm, w)) / (2 * h);
    const double nw = (loss_of(x, wp) - loss_of(x, wm)) / (2 * h);
    EXPECT_NEAR(gx[i], nx, 1e-6 * (1 + std::abs(nx))) << "dL/dx[" << i << "]";
    EXPECT_NEAR(gw[i], nw, 1e-6 * (1 + std::abs(nw))) << "dL/dw[" << i << "]";
  }
}

TEST(ForeignOps, ImperativeAutogradMatchesFiniteDifferences) {
  register_c_ops();
  const std::vector<double> xv = {0.5, -1.5, 2.0};
  NDArray x = NDArray::from_vector<double>(Shape{3}, xv);
  x.attach_grad();
  NDArray y;
  {
    autograd::RecordScope record;
    y = invoke1("cc_cube", {x});
  }
  y.backward();
  const auto g = x.grad().to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) {
    const double h = 1e-6;
    const double num = (std::pow(xv[i] + h, 3) - std::pow(xv[i] - h, 3)) / (2 * h);
    EXPECT_NEAR(g[i], num, 1e-6 * (1 + std::abs(num)));
  }
}

TEST(ReadOnlyArrays, OperatorsRefuseToWriteThem) {
  NDArray ro = NDArray::zeros(Shape{4});
  ro.storage()->read_only = true;
  NDArray x = NDArray::ones(Shape{4});
  InvokeOptions opt;
  opt.outputs = {ro};
  try {
    invoke("_copy", {x}, {}, opt);
    FAIL() << "wrote a read-only array";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("read-only"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ro.to_vector<float>()[0], 0.0f);
}

// ---- handles (Note [Generation-checked handles]) ---------------------------------------------

std::string handle_text(const void* handle) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llx",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(handle)));
  return buf;
}

bool has(const char* text, const std::string& part) {
  return std::string(text).find(part) != std::string::npos;
}

weft_array_t new_c_array() {
  const int64_t shape[2] = {3, 5};
  weft_array_t a = nullptr;
  EXPECT_EQ(weft_array_zeros(shape, 2, 0, weft_device_t{1, 0}, &a), 0) << weft_last_error();
  return a;
}

constexpr const char* kTinyGraph = R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
  {"op": "Activation", "name": "relu", "attrs": {"act_type": "relu"}, "inputs": [[0, 0, 0]]}],
  "arg_nodes": [0], "heads": [[1, 0, 0]]})";

TEST(Handles, UseAfterFreeIsAnErrorNamingTheHandleWhenItsMemoryIsReused) {
  weft_array_t stale = new_c_array();
  ASSERT_EQ(weft_array_free(stale), 0);
  // New handles of the same size: the freed one's slot (or, before, its memory) is reused.
  std::vector<weft_array_t> fresh;
  for (int i = 0; i < 64; ++i) fresh.push_back(new_c_array());
  int dtype = -1;
  EXPECT_EQ(weft_array_dtype(stale, &dtype), -1);
  EXPECT_TRUE(has(weft_last_error(), "not a live weft array handle")) << weft_last_error();
  EXPECT_TRUE(has(weft_last_error(), "freed")) << weft_last_error();
  EXPECT_TRUE(has(weft_last_error(), handle_text(stale))) << weft_last_error();
  const int64_t* shape = nullptr;
  int ndim = 0;
  EXPECT_EQ(weft_array_shape(stale, &shape, &ndim), -1);
  // The new handles are unaffected.
  for (weft_array_t a : fresh) {
    ASSERT_EQ(weft_array_shape(a, &shape, &ndim), 0) << weft_last_error();
    EXPECT_EQ(ndim, 2);
    EXPECT_EQ(weft_array_free(a), 0);
  }
}

TEST(Handles, DoubleFreeIsAnErrorAndLeavesTheSlotsNewOwnerAlive) {
  weft_array_t a = new_c_array();
  ASSERT_EQ(weft_array_free(a), 0);
  EXPECT_EQ(weft_array_free(a), -1);
  EXPECT_TRUE(has(weft_last_error(), "freed")) << weft_last_error();
  EXPECT_TRUE(has(weft_last_error(), handle_text(a))) << weft_last_error();
  // Freed again after its slot went to a new array: the new array stays alive.
  weft_array_t b = new_c_array();
  EXPECT_EQ(weft_array_free(a), -1);
  int dtype = -1;
  EXPECT_EQ(weft_array_dtype(b, &dtype), 0) << weft_last_error();
  EXPECT_EQ(dtype, 0);
  EXPECT_EQ(weft_array_free(b), 0);
  EXPECT_EQ(weft_array_free(nullptr), 0);
}

TEST(Handles, GraphsAndExecutorsAreGenerationCheckedToo) {
  weft_graph_t g = nullptr;
  ASSERT_EQ(weft_graph_load_json(kTinyGraph, std::strlen(kTinyGraph), &g), 0) << weft_last_error();
  const char* names[1] = {"x"};
  const int64_t dims[2] = {2, 3};
  const int64_t* shapes[1] = {dims};
  const int ndims[1] = {2};
  weft_executor_t e = nullptr;
  ASSERT_EQ(weft_executor_bind(g, weft_device_t{1, 0}, names, shapes, ndims, 1, 0, &e), 0)
      << weft_last_error();
  // A handle of one kind is not taken for another.
  int dtype = -1;
  EXPECT_EQ(weft_array_dtype(reinterpret_cast<weft_array_t>(g), &dtype), -1);
  EXPECT_TRUE(has(weft_last_error(), "is a weft graph handle")) << weft_last_error();
  EXPECT_EQ(weft_graph_free(reinterpret_cast<weft_graph_t>(e)), -1);
  EXPECT_TRUE(has(weft_last_error(), "is a weft executor handle")) << weft_last_error();

  ASSERT_EQ(weft_executor_free(e), 0);
  ASSERT_EQ(weft_graph_free(g), 0);
  weft_graph_t g2 = nullptr;
  ASSERT_EQ(weft_graph_load_json(kTinyGraph, std::strlen(kTinyGraph), &g2), 0);
  weft_executor_t e2 = nullptr;
  EXPECT_EQ(weft_executor_bind(g, weft_device_t{1, 0}, names, shapes, ndims, 1, 0, &e2), -1);
  EXPECT_TRUE(has(weft_last_error(), "not a live weft graph handle")) << weft_last_error();
  EXPECT_TRUE(has(weft_last_error(), handle_text(g))) << weft_last_error();
  EXPECT_EQ(weft_executor_forward(e, 0), -1);
  EXPECT_TRUE(has(weft_last_error(), "not a live weft executor handle")) << weft_last_error();
  EXPECT_TRUE(has(weft_last_error(), handle_text(e))) << weft_last_error();
  EXPECT_EQ(weft_executor_free(e), -1);
  EXPECT_EQ(weft_graph_free(g), -1);
  EXPECT_EQ(weft_graph_free(g2), 0);
}

// ---- DLPack import bounds -----------------------------------------------------------------------

TEST(DlpackImport, ByteOffsetThatWrapsTheAddressSpaceIsRefused) {
  static float storage[16];
  int64_t shape[1] = {16};
  DLManagedTensor t{};
  t.dl_tensor.data = storage;
  t.dl_tensor.device = {kDLCPU, 0};
  t.dl_tensor.ndim = 1;
  t.dl_tensor.dtype = {kDLFloat, 32, 1};
  t.dl_tensor.shape = shape;
  t.dl_tensor.strides = nullptr;
  t.deleter = nullptr;
  const auto base = reinterpret_cast<uintptr_t>(storage);
  weft_array_t out = nullptr;
  // data + byte_offset itself wraps around (the offset is a multiple of 4: alignment holds).
  t.dl_tensor.byte_offset = UINT64_MAX - 3;
  EXPECT_EQ(weft_array_from_dlpack(&t, &out), -1);
  EXPECT_TRUE(has(weft_last_error(), "byte_offset")) << weft_last_error();
  EXPECT_TRUE(has(weft_last_error(), "wraps")) << weft_last_error();
  EXPECT_EQ(out, nullptr);
  // The first element fits, the 64 bytes after it do not.
  t.dl_tensor.byte_offset = (UINTPTR_MAX - base - 15) & ~uint64_t{3};
  EXPECT_EQ(weft_array_from_dlpack(&t, &out), -1);
  EXPECT_TRUE(has(weft_last_error(), "past the end of the address space")) << weft_last_error();
  EXPECT_EQ(out, nullptr);
  // In bounds: imported (zero-copy), and freeing the handle gives the memory back.
  t.dl_tensor.byte_offset = 0;
  ASSERT_EQ(weft_array_from_dlpack(&t, &out), 0) << weft_last_error();
  EXPECT_EQ(weft_array_free(out), 0);
}

// ---- weft.hpp ----------------------------------------------------------------------------------

TEST(WeftHpp, EngineArraysOperatorsAutogradAndErrors) {
  namespace wa = weft::abi;
  wa::Var v;
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) {
    wa::push([&order, i](const weft_run_context_t&) { order.push_back(i); }, {}, {v.get()});
  }
  v.wait();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(v.version(), 5u);
  wa::push([](const weft_run_context_t&) { throw std::runtime_error("lambda says no"); }, {},
           {v.get()});
  try {
    v.wait();
    FAIL() << "the lambda's error was lost";
  } catch (const wa::Error& e) {
    EXPECT_NE(std::string(e.what()).find("lambda says no"), std::string::npos) << e.what();
  }
  EXPECT_THROW(wa::wait_all(), wa::Error);  // wait_all reports every failure since the last one
  wa::wait_all();

  wa::Array a = wa::Array::from_vector<float>({2, 2}, {1, -2, 3, -4});
  wa::Array r = wa::invoke1("Activation", {a}, {{"act_type", "relu"}});
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{1, 0, 3, 0}));
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_THROW(wa::invoke1("Activation", {a}, {{"act_type", "nope"}}), wa::Error);

  a.attach_grad();
  wa::Array y;
  {
    wa::RecordScope rec;
    y = wa::invoke1("elemwise_mul", {a, a});
  }
  y.backward();
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{2, -4, 6, -8}));

  // DLPack round trip through the wrapper: zero-copy.
  DLManagedTensor* t = a.to_dlpack();
  wa::Array b = wa::Array::from_dlpack(t);
  EXPECT_EQ(b.data(), a.data());
  wa::wait_all();
}

}  // namespace
}  // namespace weft
