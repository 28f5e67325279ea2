// A weft plugin whose operators run libtorch: `torch_gelu` (GELU, exact erf form) and its
// gradient `torch_gelu_backward`. Built against weft's C ABI header only; it links libtorch but
// nothing of weft, and exports exactly weft_plugin_abi_version and weft_plugin_init.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "weft/c_api.h"

WEFT_PLUGIN_ABI;

namespace {

// The function table weft handed to weft_plugin_init; valid for the life of the process.
const weft_plugin_api* g_api = nullptr;

// Note [Zero-copy torch views]
// weft gives a kernel compact row-major tensors that are valid during the call. at::from_blob
// wraps that memory without copying and without taking ownership (no deleter): the views live
// only inside the kernel call, so they never outlive the memory. Outputs are written through
// at::*_out into the view, so the result lands in weft's buffer; for WEFT_REQ_ADD the result is
// computed into a temporary and added in place. Inputs are wrapped through a const_cast: torch
// has no read-only tensor, and these kernels only read them.

// A CPU float32 view of `t`, or an empty tensor (after set_error) for anything else.
at::Tensor view(const DLTensor& t, const char* op, const char* what) {
  if (t.device.device_type != kDLCPU) {
    g_api->set_error((std::string(op) + ": " + what + " is not on the CPU").c_str());
    return {};
  }
  if (t.dtype.code != kDLFloat || t.dtype.bits != 32 || t.dtype.lanes != 1) {
    g_api->set_error((std::string(op) + ": " + what + " must be float32").c_str());
    return {};
  }
  std::vector<int64_t> sizes(t.shape, t.shape + t.ndim);
  auto* data = static_cast<char*>(t.data) + t.byte_offset;
  return at::from_blob(data, sizes, at::TensorOptions().dtype(at::kFloat).device(at::kCPU));
}

// Writes `result` into `out` according to `req`.
void store(const at::Tensor& result, at::Tensor& out, int req) {
  if (req == WEFT_REQ_NULL) return;
  if (req == WEFT_REQ_ADD) {
    out.add_(result);
  } else {
    out.copy_(result);
  }
}

// Runs `body` and turns any exception into weft's error protocol (no exception crosses the ABI).
template <typename Body>
int guarded(const char* op, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return g_api->set_error((std::string(op) + ": libtorch failed: " + e.what()).c_str());
  } catch (...) {
    return g_api->set_error((std::string(op) + ": libtorch failed").c_str());
  }
}

// Keeps libtorch's intra-op threads within weft's budget for this call (weft runs several
// operations at once; without this each would start one OpenMP thread per core). num_threads
// exists since weft_op_call_t got struct_size; an older weft leaves libtorch's setting alone.
void use_threads(const weft_op_call_t* call) {
  if (call->struct_size < offsetof(weft_op_call_t, num_threads) + sizeof(int)) return;
  if (call->num_threads >= 1 && call->num_threads != at::get_num_threads()) {
    at::set_num_threads(call->num_threads);
  }
}

// Shape inference shared by both operators: the output has the shape of input `index`.
template <int index>
int same_shape_as(const weft_attrs_t*, int num_inputs, const int64_t* const* in_shapes,
                  const int* in_ndims, int, int64_t* out_shapes, int* out_ndims, void*) {
  if (num_inputs <= index) return g_api->set_error("torch_gelu: too few inputs");
  out_ndims[0] = in_ndims[index];
  for (int d = 0; d < in_ndims[index]; ++d) out_shapes[d] = in_shapes[index][d];
  return 0;
}

// torch_gelu: out = x * Phi(x), Phi the standard normal CDF (at::gelu, approximate="none").
int gelu_forward(const weft_op_call_t* call, void*) {
  use_threads(call);
  return guarded("torch_gelu", [&] {
    at::Tensor x = view(call->inputs[0], "torch_gelu", "input 'data'");
    at::Tensor out = view(call->outputs[0], "torch_gelu", "output");
    if (!x.defined() || !out.defined()) return -1;
    const int req = call->req[0];
    if (req == WEFT_REQ_WRITE || req == WEFT_REQ_INPLACE) {
      at::gelu_out(out, x);  // in place is fine: GELU is elementwise
    } else {
      store(at::gelu(x), out, req);
    }
    return 0;
  });
}

// torch_gelu_backward: inputs (out_grad, x, y) per weft_op_def.gradient; x_grad = out_grad *
// GELU'(x) (at::gelu_backward). y is not needed.
int gelu_backward(const weft_op_call_t* call, void*) {
  use_threads(call);
  return guarded("torch_gelu_backward", [&] {
    at::Tensor dy = view(call->inputs[0], "torch_gelu_backward", "input 'out_grad'");
    at::Tensor x = view(call->inputs[1], "torch_gelu_backward", "input 'data'");
    at::Tensor dx = view(call->outputs[0], "torch_gelu_backward", "output");
    if (!dy.defined() || !x.defined() || !dx.defined()) return -1;
    const int req = call->req[0];
    if (req == WEFT_REQ_WRITE || req == WEFT_REQ_INPLACE) {
      at::gelu_backward_out(dx, dy, x);
    } else {
      store(at::gelu_backward(dy, x), dx, req);
    }
    return 0;
  });
}

int register_ops(const weft_plugin_api* api) {
  static const char* const kBackwardInputs[] = {"out_grad", "data", "output"};
  weft_op_def back;
  std::memset(&back, 0, sizeof back);
  back.struct_size = sizeof back;
  back.name = "torch_gelu_backward";
  back.description = "Gradient of torch_gelu: out_grad * GELU'(data) (libtorch)";
  back.num_inputs = 3;
  back.num_outputs = 1;
  back.input_names = kBackwardInputs;
  back.kind = WEFT_OP_PURE;
  back.devices = WEFT_DEVICE_MASK_CPU;
  back.infer_shape = &same_shape_as<1>;
  back.compute = &gelu_backward;
  if (api->register_op(&back) != 0) return -1;

  weft_op_def fwd;
  std::memset(&fwd, 0, sizeof fwd);
  fwd.struct_size = sizeof fwd;
  fwd.name = "torch_gelu";
  fwd.description = "GELU, x * Phi(x) (exact erf form), computed by libtorch";
  fwd.num_inputs = 1;
  fwd.num_outputs = 1;
  fwd.kind = WEFT_OP_PURE;
  fwd.devices = WEFT_DEVICE_MASK_CPU;
  fwd.infer_shape = &same_shape_as<0>;
  fwd.compute = &gelu_forward;
  fwd.gradient = "torch_gelu_backward";  // registered first: it must exist
  return api->register_op(&fwd);
}

}  // namespace

// The entry point weft_load_plugin calls once after checking weft_plugin_abi_version.
extern "C" WEFT_C_EXPORT int weft_plugin_init(const weft_plugin_api* api) {
  if (api == nullptr || api->struct_size < sizeof(weft_plugin_api)) return -1;
  g_api = api;
  try {
    return register_ops(api);
  } catch (...) {
    return api->set_error("weft_torch_plugin: registration failed");
  }
}
