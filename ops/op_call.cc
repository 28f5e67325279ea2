// OpCall: resolving an application's kernel, resources and state, and inferring its outputs.
#include "ops/op_call.h"

#include <cstdint>
#include <optional>

#include "ops/kernel_threads.h"

namespace weft {

// Note [One call path]
// Every way of running an operator does the same few things: find the kernel for the device,
// read what the kernel asks for (scratch memory, the random state), create a stateful kernel's
// state, and call whichever kind of kernel it is with an OpContext. They were written three
// times (the imperative path, the executor, the data layer's host runs), and the copies had
// drifted: one allocated a workspace per request, another summed them. OpCall is the one copy.
// What differs stays with the caller: where memory comes from (a pooled allocation per call, the
// executor's planned arena, a host buffer), which engine variables the call reads and writes,
// and whether it runs inline (Note [Tiny kernels run where they become ready] in
// ndarray/invoke.cc), on a worker, or inside a captured graph.

OpKernel OpKernel::of(const Op& op, DeviceType device) {
  OpKernel k;
  k.compute = op.compute(device);
  if (k.compute == nullptr) k.async = op.async_compute(device);
  if (k.compute == nullptr && k.async == nullptr) k.stateful = op.stateful_compute(device);
  return k;
}

OpResources OpResources::of(const OpAttrs& attrs, DeviceType device, const std::vector<Shape>& in,
                            const std::vector<Shape>& out) {
  OpResources r;
  const FResourceRequest& request = attrs.op->resource_request(device);
  if (!request) return r;
  // A CPU workspace is sized for the most threads the kernel may get, also when the call is made
  // inside another kernel (Note [Primitive thread count] in ops/cpu/dnnl_util.cc).
  std::optional<WidestKernelPlans> widest;
  if (device == DeviceType::kCPU || device == DeviceType::kCUDAHost) widest.emplace();
  for (const ResourceRequest& q : request(attrs, in, out)) {
    if (q.kind == ResourceRequest::Kind::kWorkspace) {
      WEFT_CHECK_AS(OutOfMemory, q.bytes <= SIZE_MAX - r.workspace_bytes)
          << attrs.where() << ": its workspace requests add up to more than 2^64 bytes";
      r.workspace = true;
      r.workspace_bytes += q.bytes;
    } else {
      r.random = true;
      r.device_seed = q.device_seed;
      r.train_only = q.train_only;
    }
  }
  return r;
}

void infer_call(const OpAttrs& attrs, const std::vector<Shape>& in_shapes,
                const std::vector<DType>& in_types, std::vector<Shape>& out_shapes,
                std::vector<DType>& out_types) {
  const Op& op = *attrs.op;
  thread_local std::vector<Shape> shapes;
  thread_local std::vector<DType> types;
  shapes = in_shapes;
  types = in_types;
  op.infer_shape(attrs, shapes, out_shapes);
  op.infer_type(attrs, types, out_types);
  for (size_t i = 0; i < in_shapes.size(); ++i) {
    WEFT_CHECK_AS(ShapeError, shapes[i] == in_shapes[i])
        << attrs.where() << ": input " << i << " has shape " << in_shapes[i] << " but the op needs "
        << shapes[i];
    WEFT_CHECK_AS(ShapeError, types[i] == in_types[i])
        << attrs.where() << ": input " << i << " has dtype " << dtype_name(in_types[i])
        << " but the op needs " << dtype_name(types[i]);
  }
  for (size_t i = 0; i < out_shapes.size(); ++i) {
    WEFT_CHECK_AS(ShapeError, out_shapes[i].known())
        << attrs.where() << ": could not infer the shape of output " << i << " (got "
        << out_shapes[i] << ")";
    WEFT_CHECK_AS(ShapeError, out_types[i] != DType::kUnknown)
        << attrs.where() << ": could not infer the dtype of output " << i;
  }
}

OpCall OpCall::make(const OpAttrs& attrs, Device device, const std::vector<Shape>& in_shapes,
                    const std::vector<DType>& in_types, const std::vector<Shape>& out_shapes) {
  OpCall call;
  call.attrs = &attrs;
  call.device = device;
  call.kernel = OpKernel::of(*attrs.op, device.type);
  WEFT_CHECK_AS(NotImplemented, call.kernel.valid())
      << attrs.where() << " has no kernel on " << to_string(device);
  call.resources = OpResources::of(attrs, device.type, in_shapes, out_shapes);
  if (call.kernel.stateful != nullptr) {
    const auto& create = attrs.op->attr<FCreateOpState>();
    WEFT_CHECK_AS(InternalError, static_cast<bool>(create))
        << attrs.where() << ": stateful op without FCreateOpState";
    call.state = create(attrs, device, in_shapes, in_types);
  }
  return call;
}

}  // namespace weft
