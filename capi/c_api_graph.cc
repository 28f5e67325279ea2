// The C ABI: graphs (MXNet/NNVM symbol JSON) and executors.
#include "capi/c_api_internal.h"
#include "graph/json.h"

namespace weft::capi {

// Note [Generation-checked handles].
constinit HandleTable<weft_graph_s> g_graph_handles{HandleKind::kGraph, "graph"};
constinit HandleTable<weft_executor_s> g_executor_handles{HandleKind::kExecutor, "executor"};

}  // namespace weft::capi

using namespace weft;        // NOLINT(google-build-using-namespace)
using namespace weft::capi;  // NOLINT(google-build-using-namespace)

extern "C" {

int weft_graph_load_json(const char* json, size_t length, weft_graph_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = nullptr;
  WEFT_CHECK_AS(ValueError, length == 0 || json != nullptr) << "argument 'json' is NULL";
  auto g = std::make_shared<const graph::Graph>(
      graph::load_json(std::string_view(json != nullptr ? json : "", length)));
  auto h = std::make_unique<weft_graph_s>();
  h->graph = std::move(g);
  *out = make_handle(g_graph_handles, std::move(h));
  WEFT_C_END("weft_graph_load_json")
}

int weft_graph_load_file(const char* path, weft_graph_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  require(path, "path");
  *out = nullptr;
  auto g = std::make_shared<const graph::Graph>(graph::load_json_file(path));
  auto h = std::make_unique<weft_graph_s>();
  h->graph = std::move(g);
  *out = make_handle(g_graph_handles, std::move(h));
  WEFT_C_END("weft_graph_load_file")
}

int weft_graph_free(weft_graph_t graph) {
  WEFT_C_BEGIN
  free_handle(g_graph_handles, graph, "graph", "graph");
  WEFT_C_END("weft_graph_free")
}

int weft_executor_bind(weft_graph_t graph, weft_device_t device, const char* const* input_names,
                       const int64_t* const* shapes, const int* ndims, int num_inputs, int grad_req,
                       weft_executor_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = nullptr;
  const weft_graph_s& g = graph_of(graph, "graph");
  WEFT_CHECK_AS(ValueError, num_inputs >= 0) << "num_inputs " << num_inputs << " is negative";
  WEFT_CHECK_AS(ValueError, num_inputs == 0 ||
                                (input_names != nullptr && shapes != nullptr && ndims != nullptr))
      << "input_names, shapes or ndims is NULL with " << num_inputs << " inputs";
  WEFT_CHECK_AS(ValueError, grad_req >= WEFT_GRAD_NULL && grad_req <= WEFT_GRAD_ADD)
      << "grad_req " << grad_req << " is not 0 (null), 1 (write) or 2 (add)";
  graph::BindOptions options;
  options.device = to_device(device);
  options.default_grad_req = static_cast<GradReq>(grad_req);
  for (int i = 0; i < num_inputs; ++i) {
    WEFT_CHECK_AS(ValueError, input_names[i] != nullptr) << "input_names[" << i << "] is NULL";
    const std::string arg = "shapes[" + std::to_string(i) + "]";
    options.inputs.shapes[input_names[i]] = to_shape(shapes[i], ndims[i], arg.c_str());
  }
  auto h = std::make_unique<weft_executor_s>();
  h->exec = graph::Executor::bind(g.graph, options);
  *out = make_handle(g_executor_handles, std::move(h));
  WEFT_C_END("weft_executor_bind")
}

int weft_executor_free(weft_executor_t exec) {
  WEFT_C_BEGIN
  free_handle(g_executor_handles, exec, "executor", "exec");
  WEFT_C_END("weft_executor_free")
}

namespace {
// The bound argument or auxiliary state `name`; ValueError listing the names when absent.
NDArray bound_array(const graph::Executor& e, const char* name) {
  for (const auto& n : e.arg_names()) {
    if (n == name) return e.arg(n);
  }
  for (const auto& n : e.aux_names()) {
    if (n == name) return e.aux(n);
  }
  std::string known;
  for (const auto& n : e.arg_names()) known += (known.empty() ? "" : ", ") + n;
  for (const auto& n : e.aux_names()) known += (known.empty() ? "" : ", ") + n;
  WEFT_THROW(ValueError) << "the graph has no argument or auxiliary state '" << name
                         << "' (it has: " << known << ")";
}
}  // namespace

int weft_executor_set_arg(weft_executor_t exec, const char* name, weft_array_t value) {
  WEFT_C_BEGIN
  require(name, "name");
  const graph::Executor& e = *executor_of(exec, "exec").exec;
  const NDArray& src = array_of(value, "value").array;
  NDArray dst = bound_array(e, name);
  WEFT_CHECK_AS(ShapeError, src.shape() == dst.shape() && src.dtype() == dst.dtype())
      << "argument '" << name << "' is bound as " << dst.shape() << " " << dtype_name(dst.dtype())
      << "; the value is " << src.shape() << " " << dtype_name(src.dtype());
  src.copy_to(dst);
  WEFT_C_END("weft_executor_set_arg")
}

int weft_executor_arg(weft_executor_t exec, const char* name, weft_array_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  require(name, "name");
  *out = new_array_handle(bound_array(*executor_of(exec, "exec").exec, name));
  WEFT_C_END("weft_executor_arg")
}

int weft_executor_grad(weft_executor_t exec, const char* name, weft_array_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  require(name, "name");
  NDArray g = executor_of(exec, "exec").exec->grad(name);
  WEFT_CHECK(!g.is_none()) << "argument '" << name << "' has no gradient (grad_req null)";
  *out = new_array_handle(std::move(g));
  WEFT_C_END("weft_executor_grad")
}

int weft_executor_forward(weft_executor_t exec, int is_train) {
  WEFT_C_BEGIN
  executor_of(exec, "exec").exec->forward(is_train != 0);
  WEFT_C_END("weft_executor_forward")
}

int weft_executor_backward(weft_executor_t exec, const weft_array_t* head_grads,
                           int num_head_grads) {
  WEFT_C_BEGIN
  weft_executor_s& e = executor_of(exec, "exec");
  WEFT_CHECK_AS(ValueError, num_head_grads >= 0 && (num_head_grads == 0 || head_grads != nullptr))
      << "head_grads is NULL or num_head_grads " << num_head_grads << " is negative";
  std::vector<NDArray> grads;
  for (int i = 0; i < num_head_grads; ++i) {
    const std::string arg = "head_grads[" + std::to_string(i) + "]";
    grads.push_back(array_of(head_grads[i], arg.c_str()).array);
  }
  e.exec->backward(grads);
  WEFT_C_END("weft_executor_backward")
}

int weft_executor_num_outputs(weft_executor_t exec, int* out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = static_cast<int>(executor_of(exec, "exec").exec->outputs().size());
  WEFT_C_END("weft_executor_num_outputs")
}

int weft_executor_output(weft_executor_t exec, int index, weft_array_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  const auto& outs = executor_of(exec, "exec").exec->outputs();
  WEFT_CHECK_AS(ValueError, index >= 0 && index < static_cast<int>(outs.size()))
      << "output index " << index << " is out of range (the graph has " << outs.size()
      << " outputs)";
  *out = new_array_handle(outs[index]);
  WEFT_C_END("weft_executor_output")
}

}  // extern "C"
