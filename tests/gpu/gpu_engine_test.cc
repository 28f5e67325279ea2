// The engine on a GPU: a random workload over CPU and GPU variables (kernels, copies both ways,
// CPU work) against the synchronous engine, cross-stream ordering, errors from a failing launch,
// and deleting a variable while its kernel still runs. Every test skips without a CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "devices/device_api.h"
#include "engine/engine.h"
#include "tests/gpu/test_kernels.h"

namespace weft {
namespace {

bool have_gpu() {
  DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA);
  return api != nullptr && api->device_count() > 0;
}

#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device"

constexpr int64_t kElems = 4096;

// A buffer of kElems int64 values on the CPU or cuda:0 with its engine variable.
struct Buffer {
  Device device;
  int64_t* data = nullptr;
  VarHandle var;
};

struct World {
  std::unique_ptr<Engine> engine;
  std::vector<Buffer> buffers;

  World(EngineKind kind, int cpu, int gpu, int streams) {
    EngineConfig config;
    config.kind = kind;
    config.gpu_compute_streams = streams;
    engine = Engine::create(config);
    for (int i = 0; i < cpu + gpu; ++i) {
      Buffer b;
      b.device = i < cpu ? Device::cpu() : Device::cuda(0);
      if (i < cpu) {
        b.data = new int64_t[kElems];
        for (int64_t j = 0; j < kElems; ++j) b.data[j] = i * 1000 + j;
      } else {
        std::vector<int64_t> init(kElems);
        for (int64_t j = 0; j < kElems; ++j) init[static_cast<size_t>(j)] = i * 1000 + j;
        EXPECT_EQ(cudaMalloc(&b.data, kElems * sizeof(int64_t)), cudaSuccess);
        EXPECT_EQ(cudaMemcpy(b.data, init.data(), kElems * sizeof(int64_t), cudaMemcpyDefault),
                  cudaSuccess);
      }
      b.var = engine->new_var();
      buffers.push_back(b);
    }
  }
  ~World() {
    engine->wait_for_all();
    for (auto& b : buffers) {
      engine->delete_var(b.var);
    }
    engine.reset();
    for (auto& b : buffers) {
      if (b.device.type == DeviceType::kCPU) {
        delete[] b.data;
      } else {
        cudaFree(b.data);
      }
    }
  }
  std::vector<int64_t> read(size_t i) {
    std::vector<int64_t> out(kElems);
    cudaMemcpy(out.data(), buffers[i].data, kElems * sizeof(int64_t), cudaMemcpyDefault);
    return out;
  }
};

// One step of the random workload: dst = dst*31 + a + b + k where the operands live on the same
// device, or a copy between devices.
struct Step {
  int kind;  // 0 compute, 1 copy
  size_t dst, a, b;
  int64_t k;
};

void push_step(World& w, const Step& s, long long spin) {
  Buffer dst = w.buffers[s.dst], a = w.buffers[s.a], b = w.buffers[s.b];
  if (s.kind == 1) {
    FnProperty property =
        dst.device.type == DeviceType::kCUDA && a.device.type == DeviceType::kCPU
            ? FnProperty::kCopyToDevice
        : dst.device.type == DeviceType::kCPU && a.device.type == DeviceType::kCUDA
            ? FnProperty::kCopyFromDevice
            : FnProperty::kNormal;
    Device on = dst.device.type == DeviceType::kCUDA ? dst.device : a.device;
    w.engine->push_sync(
        [dst, a, on](const RunContext& rc) {
          DeviceAPI::get(on.type)->copy(dst.data, dst.device, a.data, a.device,
                                        kElems * sizeof(int64_t), rc.stream);
        },
        on, {a.var}, {dst.var}, property, 0, "copy");
    return;
  }
  if (dst.device.type == DeviceType::kCUDA) {
    w.engine->push_sync(
        [dst, a, b, k = s.k, spin](const RunContext& rc) {
          testing::launch_combine(dst.data, a.data, b.data, k, kElems, spin, rc.stream.handle);
        },
        dst.device, {a.var, b.var}, {dst.var}, FnProperty::kNormal, 0, "combine");
  } else {
    w.engine->push_sync(
        [dst, a, b, k = s.k](const RunContext&) {
          for (int64_t i = 0; i < kElems; ++i) {
            uint64_t v = static_cast<uint64_t>(dst.data[i]) * 31u;
            v += static_cast<uint64_t>(a.data[i]) + static_cast<uint64_t>(b.data[i]);
            dst.data[i] = static_cast<int64_t>(v + static_cast<uint64_t>(k));
          }
        },
        dst.device, {a.var, b.var}, {dst.var}, FnProperty::kNormal, 0, "combine_cpu");
  }
}

std::vector<Step> random_steps(int count, int cpu, int gpu, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Step> steps;
  const int n = cpu + gpu;
  for (int i = 0; i < count; ++i) {
    Step s;
    s.kind = rng() % 4 == 0 ? 1 : 0;
    s.dst = rng() % n;
    s.k = static_cast<int64_t>(rng() % 1000);
    const bool dst_gpu = static_cast<int>(s.dst) >= cpu;
    if (s.kind == 1) {
      s.a = dst_gpu ? rng() % cpu : cpu + rng() % gpu;                      // across devices
      if (rng() % 3 == 0) s.a = dst_gpu ? cpu + rng() % gpu : rng() % cpu;  // or within
      if (s.a == s.dst) s.a = (s.a + 1) % n;
      if ((static_cast<int>(s.a) >= cpu) == dst_gpu && !dst_gpu) {
        s.kind = 0;  // a CPU-to-CPU "copy": make it a compute step instead
      }
    } else {
      s.a = dst_gpu ? cpu + rng() % gpu : rng() % cpu;
    }
    s.b = dst_gpu ? cpu + rng() % gpu : rng() % cpu;
    if (s.kind == 0 && (s.a == s.dst || s.b == s.dst)) continue;  // operands distinct from dst
    steps.push_back(s);
  }
  return steps;
}

TEST(GpuEngine, RandomWorkloadOfCpuAndGpuVarsMatchesTheSynchronousEngine) {
  REQUIRE_GPU();
  constexpr int kCpu = 6, kGpu = 6;
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::vector<Step> steps = random_steps(600, kCpu, kGpu, seed);
    World reference(EngineKind::kSync, kCpu, kGpu, 1);
    for (const Step& s : steps) push_step(reference, s, 0);
    reference.engine->wait_for_all();
    for (int streams : {1, 3}) {
      World threaded(EngineKind::kThreaded, kCpu, kGpu, streams);
      for (const Step& s : steps) push_step(threaded, s, s.dst % 5 == 0 ? 2000 : 0);
      threaded.engine->wait_for_all();
      for (size_t i = 0; i < kCpu + kGpu; ++i) {
        ASSERT_EQ(threaded.read(i), reference.read(i))
            << "buffer " << i << ", seed " << seed << ", " << streams << " streams";
      }
    }
  }
}

TEST(GpuEngine, ReadersOnOtherStreamsWaitForTheWritersEvent) {
  REQUIRE_GPU();
  // A slow kernel writes X; then many ops each read X into a fresh Y on round-robin streams.
  World w(EngineKind::kThreaded, 0, 9, 4);
  for (int round = 0; round < 20; ++round) {
    Buffer x = w.buffers[0];
    w.engine->push_sync(
        [x, round](const RunContext& rc) {
          testing::launch_combine(x.data, nullptr, nullptr, round, kElems, 200000,
                                  rc.stream.handle);
        },
        x.device, {}, {x.var}, FnProperty::kNormal, 0, "slow_write");
    for (size_t i = 1; i < 9; ++i) {
      Buffer y = w.buffers[i];
      // y = y*31 + x  → with y reset to 0 first: y = x.
      w.engine->push_sync(
          [x, y](const RunContext& rc) {
            cudaMemsetAsync(y.data, 0, kElems * sizeof(int64_t),
                            static_cast<cudaStream_t>(rc.stream.handle));
            testing::launch_combine(y.data, x.data, nullptr, 0, kElems, 0, rc.stream.handle);
          },
          y.device, {x.var}, {y.var}, FnProperty::kNormal, 0, "read_x");
    }
    w.engine->wait_for_all();
    std::vector<int64_t> expect = w.read(0);
    for (size_t i = 1; i < 9; ++i) ASSERT_EQ(w.read(i), expect) << "reader " << i;
  }
}

TEST(GpuEngine, AFailedLaunchReachesTheReaderAndTheEngineStaysUsable) {
  REQUIRE_GPU();
  World w(EngineKind::kThreaded, 1, 1, 2);
  Buffer g = w.buffers[1], c = w.buffers[0];
  w.engine->push_sync(
      [](const RunContext& rc) {
        std::string error = testing::launch_invalid(rc.stream.handle);
        if (!error.empty()) throw Error("bad_kernel on cuda:0 failed: " + error);
      },
      g.device, {}, {g.var}, FnProperty::kNormal, 0, "bad_kernel");
  bool ran = false;
  w.engine->push_sync([&ran](const RunContext&) { ran = true; }, Device::cpu(), {g.var}, {c.var},
                      FnProperty::kNormal, 0, "dependent");
  try {
    w.engine->wait_for_var(c.var);
    FAIL() << "the error of the failed launch did not reach the reader";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad_kernel"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(ran);
  EXPECT_THROW(w.engine->wait_for_all(), EngineError);
  // Still usable.
  w.engine->push_sync(
      [g](const RunContext& rc) {
        testing::launch_combine(g.data, nullptr, nullptr, 5, kElems, 0, rc.stream.handle);
      },
      g.device, {}, {g.var}, FnProperty::kNormal, 0, "good");
  w.engine->wait_for_all();
}

TEST(GpuEngine, DeletingAVarWaitsForItsKernelBeforeTheDeleterRuns) {
  REQUIRE_GPU();
  EngineConfig config;
  config.gpu_compute_streams = 2;
  auto engine = Engine::create(config);
  for (int round = 0; round < 10; ++round) {
    int64_t* data = nullptr;
    ASSERT_EQ(cudaMalloc(&data, kElems * sizeof(int64_t)), cudaSuccess);
    ASSERT_EQ(cudaMemset(data, 0, kElems * sizeof(int64_t)), cudaSuccess);
    VarHandle v = engine->new_var();
    engine->push_sync(
        [data](const RunContext& rc) {
          testing::launch_combine(data, nullptr, nullptr, 7, kElems, 500000, rc.stream.handle);
        },
        Device::cuda(0), {}, {v}, FnProperty::kNormal, 0, "slow");
    auto seen = std::make_shared<int64_t>(-1);
    engine->delete_var(v, [data, seen](const RunContext&) {
      int64_t first = 0;
      cudaMemcpy(&first, data, sizeof(first), cudaMemcpyDeviceToHost);
      *seen = first;
      cudaFree(data);
    });
    engine->wait_for_all();
    EXPECT_EQ(*seen, 7) << "the deleter ran before the kernel writing the variable finished";
  }
}

TEST(GpuEngine, CopiesInterleavedWithComputeKeepProgramOrder) {
  REQUIRE_GPU();
  World w(EngineKind::kThreaded, 1, 1, 2);
  Buffer h = w.buffers[0], d = w.buffers[1];
  // h -> d, d = d*31 + k on the GPU, d -> h, h += 1 on the CPU.
  std::vector<int64_t> host(h.data, h.data + kElems);
  for (int i = 0; i < 40; ++i) {
    w.engine->push_sync(
        [h, d](const RunContext& rc) {
          DeviceAPI::get(DeviceType::kCUDA)
              ->copy(d.data, d.device, h.data, h.device, kElems * sizeof(int64_t), rc.stream);
        },
        d.device, {h.var}, {d.var}, FnProperty::kCopyToDevice, 0, "h2d");
    w.engine->push_sync(
        [d, i](const RunContext& rc) {
          testing::launch_combine(d.data, nullptr, nullptr, i, kElems, i % 3 == 0 ? 50000 : 0,
                                  rc.stream.handle);
        },
        d.device, {}, {d.var}, FnProperty::kNormal, 0, "gpu");
    w.engine->push_sync(
        [h, d](const RunContext& rc) {
          DeviceAPI::get(DeviceType::kCUDA)
              ->copy(h.data, h.device, d.data, d.device, kElems * sizeof(int64_t), rc.stream);
        },
        d.device, {d.var}, {h.var}, FnProperty::kCopyFromDevice, 0, "d2h");
    w.engine->push_sync(
        [h](const RunContext&) {
          for (int64_t j = 0; j < kElems; ++j) h.data[j] += 1;
        },
        Device::cpu(), {}, {h.var}, FnProperty::kNormal, 0, "cpu");
    for (auto& v : host) {
      v = static_cast<int64_t>(static_cast<uint64_t>(v) * 31u + static_cast<uint64_t>(i)) + 1;
    }
  }
  w.engine->wait_for_var(h.var);
  for (int64_t j = 0; j < kElems; ++j) ASSERT_EQ(h.data[j], host[static_cast<size_t>(j)]) << j;
}

}  // namespace
}  // namespace weft
