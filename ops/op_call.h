// One application of an operator on one device, ready to run (Note [One call path] in
// op_call.cc): the kernel that runs there, what it asks for, a stateful kernel's state, and the
// call itself. The imperative path (ndarray/invoke.cc), the graph executor and its planner, the
// data layer's host runs and the C ABI (through invoke) all prepare and call kernels with it.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "ops/op.h"

namespace weft {

/// The kernel an op runs on one device type: exactly one of the three is set when valid.
struct OpKernel {
  const FCompute* compute = nullptr;
  const FStatefulCompute* stateful = nullptr;
  const FAsyncCompute* async = nullptr;

  bool valid() const { return compute != nullptr || stateful != nullptr || async != nullptr; }
  /// The op's kernel on `device` (a plain kernel first, then an asynchronous, then a stateful
  /// one); invalid when it has none there.
  static OpKernel of(const Op& op, DeviceType device);
};

/// What one application asks for on its device (Op::resource_request of that device type).
struct OpResources {
  bool workspace = false;      ///< asked for scratch memory (possibly of 0 bytes)
  size_t workspace_bytes = 0;  ///< the sum of its workspace requests
  bool random = false;         ///< draws from the device's random state
  bool device_seed = false;    ///< with random: its CUDA kernel can take a device-side seed
  bool train_only = false;     ///< with random: it draws in training only

  /// The requests of `attrs`' op on `device` for these shapes (none when it has no request).
  static OpResources of(const OpAttrs& attrs, DeviceType device, const std::vector<Shape>& in,
                        const std::vector<Shape>& out);
};

/// Infers the outputs of one application from its inputs: `out_*` sized to the op's outputs and
/// pre-filled where the caller knows them. Throws ShapeError naming the op when the inputs do not
/// fit what the op needs or an output cannot be inferred. `in_*` are the inputs' shapes and types
/// and stay as given.
void infer_call(const OpAttrs& attrs, const std::vector<Shape>& in_shapes,
                const std::vector<DType>& in_types, std::vector<Shape>& out_shapes,
                std::vector<DType>& out_types);

/// One application on one device: attributes (owned by the caller, alive while the call is),
/// the kernel, its resources and a stateful kernel's state.
struct OpCall {
  const OpAttrs* attrs = nullptr;
  Device device;
  OpKernel kernel;
  OpResources resources;
  std::shared_ptr<OpState> state;

  /// Resolves `attrs` on `device` for inferred shapes: the kernel (NotImplemented naming op and
  /// device when there is none), the device's resource requests, and a stateful kernel's state.
  static OpCall make(const OpAttrs& attrs, Device device, const std::vector<Shape>& in_shapes,
                     const std::vector<DType>& in_types, const std::vector<Shape>& out_shapes);

  /// Calls the kernel with a complete context. An asynchronous kernel completes through `*done`
  /// (required then); the others have finished when this returns.
  void run(const OpContext& ctx, std::span<const TensorView> in, std::span<const OpReq> req,
           std::span<const TensorView> out, CallbackOnComplete* done = nullptr) const {
    if (kernel.compute != nullptr) {
      (*kernel.compute)(*attrs, ctx, in, req, out);
    } else if (kernel.async != nullptr) {
      (*kernel.async)(*attrs, ctx, in, req, out, *done);
    } else {
      (*kernel.stateful)(*state, ctx, in, req, out);
    }
  }
};

}  // namespace weft
