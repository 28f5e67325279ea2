// expect_cuda_matches_cpu: one op run by its CPU and its CUDA kernel on the same values, outputs,
// mutated inputs and gradients compared element by element.
#include <cmath>
#include <sstream>

#include "tests/ops/op_harness.h"
#include "tests/ops/op_harness_internal.h"

namespace weft::testing {
namespace {

constexpr int kMaxPrinted = 10;

bool is_floating(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 ||
         t == DType::kBFloat16;
}

// `t` in the GPU run's dtype (floating tensors only; `to` kUnknown keeps it).
HostTensor to_gpu_dtype(const HostTensor& t, DType to) {
  if (to == DType::kUnknown || t.empty() || !is_floating(t.dtype)) return t;
  return detail::cast_to(t, to);
}
// `t`'s values rounded through `to`, its dtype kept: what the CPU reference runs on.
HostTensor rounded_like_gpu(const HostTensor& t, DType to) {
  if (to == DType::kUnknown || t.empty() || !is_floating(t.dtype)) return t;
  HostTensor r = detail::cast_to(t, to);
  r.dtype = t.dtype;
  return r;
}

// EXPECTs `gpu` to match `cpu` element by element; `what` names the tensor ("output 0").
void compare(const std::string& op, const std::string& what, const HostTensor& gpu,
             const HostTensor& cpu, const CudaCompare& cmp) {
  if (gpu.empty() != cpu.empty()) {
    ADD_FAILURE() << op << ": " << what << " is " << (gpu.empty() ? "missing" : "present")
                  << " on CUDA but " << (cpu.empty() ? "missing" : "present") << " on the CPU";
    return;
  }
  if (gpu.empty()) return;
  if (gpu.shape != cpu.shape) {
    ADD_FAILURE() << op << ": " << what << " has shape " << gpu.shape << " on CUDA, " << cpu.shape
                  << " on the CPU";
    return;
  }
  int failures = 0;
  for (int64_t j = 0; j < cpu.size(); ++j) {
    const double g = gpu.data[j], c = cpu.data[j];
    if (std::isnan(g) && std::isnan(c)) continue;
    if (g == c) continue;  // equal infinities
    if (std::abs(g - c) <= cmp.atol + cmp.rtol * std::abs(c)) continue;
    if (++failures <= kMaxPrinted) {
      ADD_FAILURE() << op << ": " << what << " element " << j << ": cuda " << g << " vs cpu " << c
                    << " (|diff| " << std::abs(g - c) << " > atol " << cmp.atol << " + rtol "
                    << cmp.rtol << " * |cpu|)";
    }
  }
  if (failures > kMaxPrinted) {
    ADD_FAILURE() << op << ": " << what << ": " << failures - kMaxPrinted
                  << " more elements differ (" << failures << " of " << cpu.size() << ")";
  }
}

}  // namespace

void expect_cuda_matches_cpu(const std::string& op, const AttrMap& attrs,
                             const std::vector<HostTensor>& inputs, const CudaCompare& cmp) {
  if (!cuda_available()) {
    ADD_FAILURE() << op << ": expect_cuda_matches_cpu needs a CUDA device (WEFT_REQUIRE_CUDA())";
    return;
  }
  const DType to = cmp.cuda_dtype;
  RunOptions cpu_options = cmp.options, gpu_options = cmp.options;
  cpu_options.device = Device::cpu();
  gpu_options.device = Device::cuda(0);
  std::vector<HostTensor> cpu_in, gpu_in;
  for (const auto& t : inputs) {
    cpu_in.push_back(rounded_like_gpu(t, to));
    gpu_in.push_back(to_gpu_dtype(t, to));
  }
  cpu_options.initial_outputs.clear();
  gpu_options.initial_outputs.clear();
  for (const auto& t : cmp.options.initial_outputs) {
    cpu_options.initial_outputs.push_back(rounded_like_gpu(t, to));
    gpu_options.initial_outputs.push_back(to_gpu_dtype(t, to));
  }

  std::vector<HostTensor> cpu_mut = cpu_in, gpu_mut = gpu_in;
  std::vector<HostTensor> cpu_out, gpu_out;
  try {
    cpu_out = run_op_mutating(op, attrs, cpu_mut, cpu_options);
  } catch (const std::exception& e) {
    ADD_FAILURE() << op << ": the CPU kernel failed: " << e.what();
    return;
  }
  try {
    gpu_out = run_op_mutating(op, attrs, gpu_mut, gpu_options);
  } catch (const std::exception& e) {
    ADD_FAILURE() << op << ": the CUDA kernel failed: " << e.what();
    return;
  }
  if (gpu_out.size() != cpu_out.size()) {
    ADD_FAILURE() << op << ": " << gpu_out.size() << " outputs on CUDA, " << cpu_out.size()
                  << " on the CPU";
    return;
  }
  for (size_t k = 0; k < cpu_out.size(); ++k) {
    compare(op, "output " + std::to_string(k), gpu_out[k], cpu_out[k], cmp);
  }
  OpAttrs a = get_op(op).make_attrs(attrs, "test");
  if (const auto& f = a.op->attr<FMutateInputs>()) {
    for (int i : f(a)) {
      compare(op, "mutated input " + std::to_string(i), gpu_mut[i], cpu_mut[i], cmp);
    }
  }

  if (!cmp.gradients || !a.op->attr<FGradient>()) return;
  const int nvis = a.op->num_visible_outputs(a);
  std::vector<HostTensor> cpu_heads, gpu_heads;
  for (int k = 0; k < nvis; ++k) {
    HostTensor h;
    if (!cmp.head_grads.empty()) {
      if (k < static_cast<int>(cmp.head_grads.size())) h = cmp.head_grads[k];
    } else if (is_floating(cpu_out[k].dtype)) {
      h = HostTensor::random(cpu_out[k].shape, 4000 + k, -1.0, 1.0, cpu_out[k].dtype);
    }
    cpu_heads.push_back(rounded_like_gpu(h, to));
    gpu_heads.push_back(to_gpu_dtype(h, to));
  }
  // The gradient runs the forward again from the original inputs (no kAddTo into the forward).
  RunOptions cpu_grad = cpu_options, gpu_grad = gpu_options;
  cpu_grad.req.clear();
  gpu_grad.req.clear();
  cpu_grad.initial_outputs.clear();
  gpu_grad.initial_outputs.clear();
  std::vector<HostTensor> cpu_g, gpu_g;
  try {
    cpu_g = op_gradient(op, attrs, cpu_in, cpu_heads, cpu_grad);
  } catch (const std::exception& e) {
    ADD_FAILURE() << op << ": the CPU gradient failed: " << e.what();
    return;
  }
  try {
    gpu_g = op_gradient(op, attrs, gpu_in, gpu_heads, gpu_grad);
  } catch (const std::exception& e) {
    ADD_FAILURE() << op << ": the CUDA gradient failed: " << e.what();
    return;
  }
  for (size_t i = 0; i < cpu_g.size() && i < gpu_g.size(); ++i) {
    compare(op, "gradient of input " + std::to_string(i), gpu_g[i], cpu_g[i], cmp);
  }
}

}  // namespace weft::testing
