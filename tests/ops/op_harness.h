// Test harness for operators: runs an op's CPU (or, on a CUDA device, CUDA) kernel directly on
// host tensors (no engine), runs its FGradient with an eager host builder, checks gradients
// against central differences, and compares a CUDA kernel with the CPU one.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/build_config.h"
#include "ops/op.h"

/// Skips the calling test unless a CUDA device is usable (see weft::testing::cuda_available).
#define WEFT_REQUIRE_CUDA()                                                   \
  do {                                                                        \
    if (!::weft::testing::cuda_available()) GTEST_SKIP() << "no CUDA device"; \
  } while (0)

namespace weft::testing {

/// Whether this build has CUDA and the machine a CUDA device (false in CPU-only builds).
bool cuda_available();

/// A host tensor for tests: shape, dtype and values held as doubles (converted at the kernel
/// boundary; float16 and bfloat16 round to nearest even). An empty tensor (rank unknown) stands for
/// "no gradient".
struct HostTensor {
  Shape shape;
  DType dtype = DType::kFloat32;
  std::vector<double> data;

  static HostTensor of(Shape shape, std::vector<double> values, DType dtype = DType::kFloat32);
  /// Uniform values in [lo, hi) from a fixed seed.
  static HostTensor random(Shape shape, uint64_t seed, double lo = -1.0, double hi = 1.0,
                           DType dtype = DType::kFloat32);
  static HostTensor filled(Shape shape, double value, DType dtype = DType::kFloat32);
  bool empty() const { return !shape.rank_known(); }
  int64_t size() const { return static_cast<int64_t>(data.size()); }
  /// Element at a multi-index (row-major).
  double at(std::initializer_list<int64_t> index) const;
  double& at(std::initializer_list<int64_t> index);
};

struct RunOptions {
  bool is_train = false;
  uint64_t seed = 0;    ///< seeds the op's random state (same seed → same draws)
  int num_threads = 1;  ///< OpContext::num_threads
  /// Output requests; default kWrite for all. With kAdd, `initial_outputs` is the starting value.
  std::vector<OpReq> req;
  std::vector<HostTensor> initial_outputs;
  /// The device whose kernel runs: Device::cpu() or Device::cuda(0). On CUDA the harness copies
  /// inputs to the device, runs the kernel on its own stream and copies the results back.
  Device device = Device::cpu();
};

/// Runs `op` on `inputs`: parses attrs, infers output shapes and types, allocates outputs and
/// workspace, and calls the CPU kernel. Returns every output (hidden ones included).
std::vector<HostTensor> run_op(const std::string& op, const AttrMap& attrs,
                               const std::vector<HostTensor>& inputs,
                               const RunOptions& options = {});
/// Same; mutated inputs (FMutateInputs) are written back into `inputs`.
std::vector<HostTensor> run_op_mutating(const std::string& op, const AttrMap& attrs,
                                        std::vector<HostTensor>& inputs,
                                        const RunOptions& options = {});

/// Infers shapes; returns {inputs, outputs} after inference. Throws what FInferShape throws.
std::pair<std::vector<Shape>, std::vector<Shape>> infer_shapes(const std::string& op,
                                                               const AttrMap& attrs,
                                                               std::vector<Shape> in,
                                                               std::vector<Shape> out = {});
std::pair<std::vector<DType>, std::vector<DType>> infer_types(const std::string& op,
                                                              const AttrMap& attrs,
                                                              std::vector<DType> in,
                                                              std::vector<DType> out = {});

/// Gradients of every input given gradients of the visible outputs (`head_grads`, one per
/// visible output; an empty HostTensor means zeros), computed by the op's FGradient with a host
/// builder that runs each emitted op at once. An input without gradient comes back empty.
std::vector<HostTensor> op_gradient(const std::string& op, const AttrMap& attrs,
                                    const std::vector<HostTensor>& inputs,
                                    const std::vector<HostTensor>& head_grads,
                                    const RunOptions& options = {});

struct GradCheckOptions {
  double eps = 1e-3;   ///< finite-difference step
  double rtol = 2e-2;  ///< relative tolerance
  double atol = 2e-3;  ///< absolute tolerance
  bool is_train = false;
  uint64_t seed = 7;
  /// Inputs whose gradient is checked; empty = every floating input.
  std::vector<int> check_inputs;
  /// Inputs that must receive no gradient (FGradient returns none for them).
  std::vector<int> no_grad_inputs;
  /// Visible outputs that enter the loss; empty = all visible outputs.
  std::vector<int> outputs;
};

/// Checks FGradient against central differences of L = Σ_k <out_k, w_k> with fixed random w_k.
/// Returns a failure naming the input, element, analytic and numeric values.
::testing::AssertionResult check_gradient(const std::string& op, const AttrMap& attrs,
                                          const std::vector<HostTensor>& inputs,
                                          const GradCheckOptions& options = {});

/// Element-wise closeness: |a-b| <= atol + rtol*|b|. Names the first bad element.
::testing::AssertionResult all_close(const HostTensor& actual, const HostTensor& expected,
                                     double rtol = 1e-5, double atol = 1e-6);

/// How expect_cuda_matches_cpu compares a CUDA kernel with the CPU kernel.
struct CudaCompare {
  double rtol = 1e-5, atol = 1e-6;     ///< per element: |gpu - cpu| <= atol + rtol*|cpu|
  bool gradients = true;               ///< also compare op_gradient (when the op has FGradient)
  std::vector<HostTensor> head_grads;  ///< empty: random head gradients (fixed seed)
  RunOptions options;  ///< is_train, seed, req (kAddTo), initial_outputs; device is ignored
  /// e.g. kFloat16/kBFloat16: the GPU run casts floating inputs (and initial outputs and head
  /// gradients) to it; the CPU reference runs on the same rounded values in their own dtype.
  DType cuda_dtype = DType::kUnknown;
};

/// Comparisons the CUDA tests share: per-element tolerances; exact outputs (forward only);
/// float16/bfloat16 on the GPU with a tolerance per type; forward only with the outputs
/// accumulated (kAdd) into `initial`, on top of `base`.
inline CudaCompare cuda_tolerance(double rtol, double atol) {
  CudaCompare c;
  c.rtol = rtol;
  c.atol = atol;
  return c;
}
inline CudaCompare cuda_exact() {
  CudaCompare c = cuda_tolerance(0, 0);
  c.gradients = false;
  return c;
}
inline CudaCompare cuda_half(DType dtype, double fp16_tol, double bf16_tol) {
  const double tol = dtype == DType::kBFloat16 ? bf16_tol : fp16_tol;
  CudaCompare c = cuda_tolerance(tol, tol);
  c.cuda_dtype = dtype;
  return c;
}
inline CudaCompare cuda_add_into(std::vector<HostTensor> initial, CudaCompare base) {
  base.gradients = false;
  base.options.req.assign(initial.size(), OpReq::kAdd);
  base.options.initial_outputs = std::move(initial);
  return base;
}

/// Runs `op` on the CPU and on cuda:0 and EXPECTs every output (and mutated input, and with
/// `gradients` every input gradient) to match, naming the op, output and element of each
/// mismatch (at most 10 per tensor). Call WEFT_REQUIRE_CUDA() first.
void expect_cuda_matches_cpu(const std::string& op, const AttrMap& attrs,
                             const std::vector<HostTensor>& inputs, const CudaCompare& cmp = {});

}  // namespace weft::testing
