// NDArray on cuda:0: copies both ways, imperative operators through the engine against the same
// operators on the CPU, and autograd on the GPU against the CPU's gradients. Skips without a
// CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "devices/device_api.h"
#include "ndarray/autograd.h"
#include "ndarray/ndarray.h"

namespace weft {
namespace {

bool have_gpu() {
  DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA);
  return api != nullptr && api->device_count() > 0;
}

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device"

const Device kGpu = Device::cuda(0);

void expect_close(const NDArray& gpu, const NDArray& cpu, double rtol, double atol,
                  const std::string& what) {
  ASSERT_EQ(gpu.device(), kGpu) << what;
  std::vector<double> g = gpu.to_doubles(), c = cpu.to_doubles();
  ASSERT_EQ(g.size(), c.size()) << what;
  int failures = 0;
  for (size_t i = 0; i < g.size() && failures < 10; ++i) {
    if (!(std::abs(g[i] - c[i]) <= atol + rtol * std::abs(c[i]))) {
      ADD_FAILURE() << what << ": element " << i << " gpu " << g[i] << " cpu " << c[i];
      ++failures;
    }
  }
}

TEST(GpuNDArray, CopiesToTheDeviceAndBackAreExact) {
  REQUIRE_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kUInt8}) {
    NDArray host =
        invoke1("Cast", {NDArray::uniform(Shape{7, 13, 5}, 0, 9)}, {{"dtype", dtype_name(dtype)}});
    NDArray dev = host.copy_to(kGpu);
    EXPECT_EQ(dev.device(), kGpu);
    NDArray dev2 = dev.copy_to(kGpu);  // device to device
    NDArray back = dev2.copy_to(Device::cpu());
    EXPECT_EQ(back.to_doubles(), host.to_doubles()) << dtype_name(dtype);
    std::vector<char> raw(host.nbytes());
    dev.copy_to_host(raw.data(), raw.size());
    EXPECT_EQ(std::memcmp(raw.data(), host.raw_data(), raw.size()), 0);
  }
  // from_host straight to the device
  std::vector<float> values{1.5f, -2.0f, 3.25f};
  NDArray d = NDArray::from_host(values.data(), Shape{3}, DType::kFloat32, kGpu);
  EXPECT_EQ(d.to_doubles(), (std::vector<double>{1.5, -2.0, 3.25}));
}

TEST(GpuNDArray, PinnedHostArraysCopyAsynchronouslyAndCpuReadersWait) {
  REQUIRE_GPU();
  const Device pinned{DeviceType::kCUDAHost, 0};
  NDArray x = NDArray::uniform(Shape{1 << 20}, -1, 1);
  NDArray dev = x.copy_to(kGpu);
  for (int i = 0; i < 5; ++i) dev = invoke1("_mul_scalar", {dev}, {{"scalar", "2"}});
  NDArray staged = dev.copy_to(pinned);  // device to page-locked host memory, on the copy stream
  NDArray on_cpu = invoke1("_mul_scalar", {staged}, {{"scalar", "0.5"}});  // a CPU op behind it
  std::vector<double> got = on_cpu.to_doubles(), src = x.to_doubles();
  for (size_t i = 0; i < src.size(); i += 4099) ASSERT_DOUBLE_EQ(got[i], src[i] * 16) << i;
  NDArray back = staged.copy_to(kGpu);  // page-locked to the device
  expect_close(back, invoke1("_mul_scalar", {x}, {{"scalar", "32"}}), 0, 0, "pinned round trip");
}

// Note [Pinned staging]: large copies from and to ordinary (pageable) host memory go through
// blocks of the pinned pool; many in flight at once, of odd byte counts around the threshold,
// each arrives exact, and a CPU operation reading a copy-out result sees all of it.
TEST(GpuNDArray, LargePageableCopiesAreStagedAndExact) {
  REQUIRE_GPU();
  std::vector<NDArray> sources, results;
  for (int64_t bytes : {(64 << 10) - 1, 64 << 10, (64 << 10) + 3, 1 << 20, (3 << 20) + 7}) {
    NDArray host = invoke1("Cast", {NDArray::uniform(Shape{bytes}, 0, 255)}, {{"dtype", "uint8"}});
    NDArray dev = host.copy_to(kGpu);
    NDArray twice = invoke1("_mul_scalar", {dev}, {{"scalar", "1"}});  // a kernel between
    results.push_back(twice.copy_to(Device::cpu()));
    sources.push_back(std::move(host));
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    const NDArray& back = results[i];
    ASSERT_EQ(back.nbytes(), sources[i].nbytes());
    NDArray summed = invoke1("sum", {invoke1("Cast", {back}, {{"dtype", "float64"}})});
    NDArray expected = invoke1("sum", {invoke1("Cast", {sources[i]}, {{"dtype", "float64"}})});
    EXPECT_EQ(summed.item(), expected.item()) << "copy " << i << " (CPU reader behind copy-out)";
    back.wait_to_read();
    EXPECT_EQ(std::memcmp(back.raw_data(), sources[i].raw_data(), back.nbytes()), 0)
        << "copy " << i << " of " << back.nbytes() << " bytes";
  }
}

TEST(GpuNDArray, ImperativeOperatorsMatchTheCpu) {
  REQUIRE_GPU();
  NDArray x = NDArray::uniform(Shape{4, 3, 9, 9}, -1, 1);
  NDArray w = NDArray::uniform(Shape{8, 3, 3, 3}, -0.5, 0.5);
  NDArray b = NDArray::uniform(Shape{8}, -0.1, 0.1);
  NDArray xg = x.copy_to(kGpu), wg = w.copy_to(kGpu), bg = b.copy_to(kGpu);
  expect_close(invoke1("exp", {xg}), invoke1("exp", {x}), 1e-6, 1e-6, "exp");
  NDArray row = NDArray::uniform(Shape{1, 3, 1, 9}, -1, 1);
  expect_close(invoke1("broadcast_add", {xg, row.copy_to(kGpu)}),
               invoke1("broadcast_add", {x, row}), 1e-6, 1e-6, "broadcast_add");
  expect_close(invoke1("sum", {xg}, {{"axis", "(1, 3)"}}),
               invoke1("sum", {x}, {{"axis", "(1, 3)"}}), 1e-5, 1e-5, "sum");
  expect_close(invoke1("softmax", {xg}, {{"axis", "1"}}), invoke1("softmax", {x}, {{"axis", "1"}}),
               1e-5, 1e-6, "softmax");
  AttrMap conv{{"kernel", "(3, 3)"}, {"num_filter", "8"}, {"pad", "(1, 1)"}, {"stride", "(2, 2)"}};
  expect_close(invoke1("Convolution", {xg, wg, bg}, conv), invoke1("Convolution", {x, w, b}, conv),
               1e-4, 1e-4, "Convolution");
  AttrMap pool{{"kernel", "(3, 3)"}, {"stride", "(2, 2)"}, {"pool_type", "max"}};
  expect_close(invoke1("Pooling", {xg}, pool), invoke1("Pooling", {x}, pool), 0, 0, "Pooling");
  NDArray fw = NDArray::uniform(Shape{10, 3 * 9 * 9}, -0.1, 0.1);
  NDArray fb = NDArray::uniform(Shape{10}, -0.1, 0.1);
  AttrMap fc{{"num_hidden", "10"}};
  expect_close(invoke1("FullyConnected", {xg, fw.copy_to(kGpu), fb.copy_to(kGpu)}, fc),
               invoke1("FullyConnected", {x, fw, fb}, fc), 1e-4, 1e-5, "FullyConnected");
}

TEST(GpuNDArray, AutogradOnTheGpuMatchesTheCpu) {
  REQUIRE_GPU();
  NDArray x = NDArray::uniform(Shape{16, 20}, -1, 1);
  NDArray w1 = NDArray::uniform(Shape{32, 20}, -0.3, 0.3), b1 = NDArray::zeros(Shape{32});
  NDArray w2 = NDArray::uniform(Shape{5, 32}, -0.3, 0.3), b2 = NDArray::zeros(Shape{5});
  std::vector<NDArray> params_cpu{w1, b1, w2, b2}, params_gpu;
  for (auto& p : params_cpu) params_gpu.push_back(p.copy_to(kGpu));
  auto run = [](const NDArray& input, std::vector<NDArray>& p) {
    for (auto& a : p) a.attach_grad();
    NDArray loss;
    {
      autograd::RecordScope record;
      NDArray h = invoke1("FullyConnected", {input, p[0], p[1]}, {{"num_hidden", "32"}});
      h = invoke1("Activation", {h}, {{"act_type", "tanh"}});
      NDArray o = invoke1("FullyConnected", {h, p[2], p[3]}, {{"num_hidden", "5"}});
      loss = invoke1("sum", {invoke1("square", {o})});
    }
    loss.backward();
    return loss;
  };
  NDArray lc = run(x, params_cpu);
  NDArray lg = run(x.copy_to(kGpu), params_gpu);
  expect_close(lg, lc, 1e-5, 1e-5, "loss");
  for (size_t i = 0; i < params_cpu.size(); ++i) {
    expect_close(params_gpu[i].grad(), params_cpu[i].grad(), 1e-4, 1e-5,
                 "gradient of parameter " + std::to_string(i));
  }
}

TEST(GpuNDArray, ManySmallOpsInFlightStayOrdered) {
  REQUIRE_GPU();
  NDArray a = NDArray::zeros(Shape{1}, DType::kFloat32, kGpu);
  for (int i = 0; i < 2000; ++i) a = invoke1("_plus_scalar", {a}, {{"scalar", "1"}});
  EXPECT_EQ(a.item(), 2000.0);
}

// Note [Renewed GPU variables]: an array of device memory dropped while a slow kernel still
// writes it gives its memory and variable to the next array of its size, whose first kernel may
// run on another stream. The new array must see only its own values: its writer waits for the
// slow kernel through the variable's marks.
TEST(GpuNDArray, RecycledDeviceMemoryWaitsForTheOldArraysWork) {
  REQUIRE_GPU();
  // 64×64 float32 results (16 KiB, recyclable) of products slow enough to still run when the
  // next array takes their memory.
  NDArray p = NDArray::uniform(Shape{64, 1 << 17}, -1, 1).copy_to(kGpu);
  NDArray q = NDArray::uniform(Shape{1 << 17, 64}, -1, 1).copy_to(kGpu);
  std::vector<NDArray> kept;
  for (int i = 0; i < 12; ++i) {
    {
      NDArray slow = invoke1("dot", {p, q});  // dropped at once, still queued on the device
    }
    NDArray fresh = NDArray::zeros(Shape{64, 64}, DType::kFloat32, kGpu);
    kept.push_back(invoke1("_plus_scalar", {fresh}, {{"scalar", std::to_string(i)}}));
    kept.push_back(std::move(fresh));
  }
  for (size_t k = 0; k < kept.size(); ++k) {
    const double expected = k % 2 == 0 ? static_cast<double>(k / 2) : 0.0;
    std::vector<double> v = kept[k].to_doubles();
    int wrong = 0;
    for (double x : v) wrong += x != expected;
    EXPECT_EQ(wrong, 0) << "array " << k << " (expected all " << expected << ")";
  }
}

// Independent tiny operations on the two compute streams read one array and overwrite their
// results in a loop (the tiny-op benchmark's pattern): every result holds its own value.
TEST(GpuNDArray, TinyOpsOverwrittenInALoopKeepTheirValues) {
  REQUIRE_GPU();
  NDArray a = NDArray::full(Shape{3}, 5.0, DType::kFloat32, kGpu);
  std::vector<NDArray> keep(64);
  for (int round = 0; round < 50; ++round) {
    for (size_t i = 0; i < keep.size(); ++i) {
      keep[i] = invoke1("_plus_scalar", {a}, {{"scalar", std::to_string(round * 100 + i)}});
    }
  }
  for (size_t i = 0; i < keep.size(); ++i) {
    std::vector<double> v = keep[i].to_doubles();
    for (double x : v) EXPECT_EQ(x, 5.0 + 49 * 100 + static_cast<double>(i)) << "result " << i;
  }
}

// `_random_seed_next` (Note [Random numbers in captured graphs]) on the device: each word moves
// on by the Weyl step, wrapping at 2^64; the reference is unsigned arithmetic on the host.
TEST(GpuNDArray, SeedWordsAdvanceByTheWeylStep) {
  REQUIRE_GPU();
  const std::vector<int64_t> w = {0, 1, -1, INT64_MIN, INT64_MAX, 0x0123456789ABCDEF};
  const NDArray x = NDArray::from_vector(Shape{static_cast<int64_t>(w.size())}, w).copy_to(kGpu);
  const std::vector<int64_t> y =
      invoke1("_random_seed_next", {x}).copy_to(Device::cpu()).to_vector<int64_t>();
  ASSERT_EQ(y.size(), w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_EQ(static_cast<uint64_t>(y[i]), static_cast<uint64_t>(w[i]) + 0x9E3779B97F4A7C15ull)
        << "word " << i;
  }
}

}  // namespace
}  // namespace weft
