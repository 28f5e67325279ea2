// GPU figures of the CUDA runtime, printed as "gpu_<workload> weft=<value>" lines for
// bench/gpu/run.sh, which sets them beside PyTorch's (bench/gpu/torch_gpu.py):
// - tiny_op_us: a 1-element add on cuda:0, pushed and completed, µs per op (independent ops:
//   every result is a new array; the time covers pushing N of them and waiting for all);
// - chain_10000_us: 10,000 dependent 1-element adds (a = a + 1), µs per op;
// - conv3x3_64_56_b32_<dtype>_ms: Convolution 3×3, 64→64 channels, 56², batch 32, pad 1;
// - matmul_4096_<dtype>_ms: dot of two 4096² matrices.
// Each timing is the median of several repetitions after warm-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "devices/device_api.h"
#include "ndarray/ndarray.h"
#include "ndarray/runtime.h"

namespace {

using namespace weft;
using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F>
double time_ms(F&& f, int reps) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto start = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return median(t);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA);
  if (api == nullptr || api->device_count() == 0) {
    std::printf("# weft_gpu_bench: no CUDA device; nothing measured\n");
    return 0;
  }
  const Device gpu = Device::cuda(0);
  const int reps = quick ? 3 : 7;
  AttrMap one{{"scalar", "1"}};

  // Tiny independent ops. Besides the figure, a "#" line splits it: the time to push the N ops
  // (the calling thread's share) against the time until all completed.
  {
    NDArray a = NDArray::zeros(Shape{1}, DType::kFloat32, gpu);
    const int n = quick ? 2000 : 20000;
    std::vector<NDArray> keep(static_cast<size_t>(n));
    std::vector<double> push_ms;
    auto run = [&] {
      auto start = Clock::now();
      for (int i = 0; i < n; ++i) keep[static_cast<size_t>(i)] = invoke1("_plus_scalar", {a}, one);
      push_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      Runtime::get().engine().wait_for_all();  // every op completed, as torch.cuda.synchronize
    };
    run();
    push_ms.clear();
    double ms = time_ms(run, reps);
    std::printf("# tiny_op: push %.3f us/op, pushed and completed %.3f us/op\n",
                median(push_ms) * 1000.0 / n, ms * 1000.0 / n);
    std::printf("gpu_tiny_op_us weft=%.3f\n", ms * 1000.0 / n);
  }
  // Dependent chain of 10,000.
  {
    const int n = 10000;
    auto run = [&] {
      NDArray a = NDArray::zeros(Shape{1}, DType::kFloat32, gpu);
      for (int i = 0; i < n; ++i) a = invoke1("_plus_scalar", {a}, one);
      a.wait_to_read();
    };
    run();
    double ms = time_ms(run, reps);
    std::printf("gpu_chain_10000_us weft=%.3f\n", ms * 1000.0 / n);
  }
  for (const char* dtype : {"float32", "bfloat16"}) {
    auto cast = [&](const NDArray& x) {
      return std::string(dtype) == "float32" ? x : invoke1("Cast", {x}, {{"dtype", dtype}});
    };
    try {
      NDArray x = cast(NDArray::uniform(Shape{32, 64, 56, 56}, -1, 1).copy_to(gpu));
      NDArray w = cast(NDArray::uniform(Shape{64, 64, 3, 3}, -0.1, 0.1).copy_to(gpu));
      AttrMap conv{
          {"kernel", "(3, 3)"}, {"num_filter", "64"}, {"pad", "(1, 1)"}, {"no_bias", "True"}};
      const int iters = 10;
      auto run = [&] {
        NDArray y;
        for (int i = 0; i < iters; ++i) y = invoke1("Convolution", {x, w}, conv);
        y.wait_to_read();
      };
      run();
      std::printf("gpu_conv3x3_64_56_b32_%s_ms weft=%.4f\n", dtype, time_ms(run, reps) / iters);
    } catch (const std::exception& e) {
      std::printf("# conv %s: %s\n", dtype, e.what());
    }
    try {
      NDArray a = cast(NDArray::uniform(Shape{4096, 4096}, -1, 1).copy_to(gpu));
      NDArray b = cast(NDArray::uniform(Shape{4096, 4096}, -1, 1).copy_to(gpu));
      const int iters = 10;
      auto run = [&] {
        NDArray y;
        for (int i = 0; i < iters; ++i) y = invoke1("dot", {a, b});
        y.wait_to_read();
      };
      run();
      std::printf("gpu_matmul_4096_%s_ms weft=%.4f\n", dtype, time_ms(run, reps) / iters);
    } catch (const std::exception& e) {
      std::printf("# matmul %s: %s\n", dtype, e.what());
    }
  }
  return 0;
}
