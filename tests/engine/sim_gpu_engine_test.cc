// The threaded engine's GPU paths on a simulated CUDA device (tests/engine/sim_gpu.h), so that
// they run, sanitizers included, on machines without a GPU: a random workload of CPU and GPU
// operations and copies against the synchronous engine, cross-stream ordering, CPU work,
// waits and deleters held until kernels complete, renewal of GPU variables, errors, and
// wait_for_all draining the streams. tests/gpu/gpu_engine_test.cc runs the same on a real GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "devices/device_api.h"
#include "engine/engine.h"
#include "tests/engine/engine_test_util.h"
#include "tests/engine/sim_gpu.h"

namespace weft::testing {
namespace {

using std::chrono::microseconds;

constexpr int64_t kElems = 64;
constexpr size_t kBytes = kElems * sizeof(int64_t);
// A kernel the host runs well ahead of: long enough that a missing wait shows as a wrong value.
constexpr microseconds kSlow{3000};

// Two simulated devices, alive for the whole process (streams and events of every engine the
// tests create point into it).
SimGpu& sim() {
  static SimGpu gpu(2);
  return gpu;
}

// Registers the simulation as the CUDA API for the test only: the other engine tests expect a
// CPU-only build to have no CUDA (DependencyTest.PushForDeviceWithoutWorkersThrowsNotImplemented).
// Every engine a test creates is destroyed within the test body, before TearDown.
class SimGpuEngine : public ::testing::Test {
 protected:
  void SetUp() override { register_device_api(DeviceType::kCUDA, &sim()); }
  void TearDown() override { register_device_api(DeviceType::kCUDA, nullptr); }
};

EngineConfig config_of(EngineKind kind, int streams) {
  EngineConfig config;
  config.kind = kind;
  config.cpu_workers = 2;
  config.gpu_compute_streams = streams;
  return config;
}

// A buffer of kElems int64 values "on" a device (host memory in the simulation) and its variable.
struct Buffer {
  Device device;
  int64_t* data = nullptr;
  VarHandle var;
  bool on_gpu() const { return device.type == DeviceType::kCUDA; }
};

// Buffers 0..cpu-1 on the CPU, then `gpu` buffers alternating between cuda:0 and cuda:1.
struct World {
  std::unique_ptr<Engine> engine;
  std::vector<Buffer> buffers;
  std::vector<std::unique_ptr<int64_t[]>> memory;

  World(EngineKind kind, int cpu, int gpu, int streams)
      : engine(Engine::create(config_of(kind, streams))) {
    for (int i = 0; i < cpu + gpu; ++i) {
      Buffer b;
      b.device = i < cpu ? Device::cpu() : Device::cuda((i - cpu) % 2);
      memory.push_back(std::make_unique<int64_t[]>(kElems));
      b.data = memory.back().get();
      for (int64_t j = 0; j < kElems; ++j) b.data[j] = i * 1000 + j;
      b.var = engine->new_var();
      buffers.push_back(b);
    }
  }
  ~World() {
    run_with_deadline("draining the engine", [this] {
      engine->wait_for_all();
      for (const Buffer& b : buffers) engine->delete_var(b.var);
      engine.reset();
    });
  }
  World(const World&) = delete;
  World& operator=(const World&) = delete;
};

// dst = dst*31 + a + b + k element-wise, wrapping (the arithmetic of every compute step).
void combine(int64_t* dst, const int64_t* a, const int64_t* b, int64_t k) {
  for (int64_t i = 0; i < kElems; ++i) {
    uint64_t v = static_cast<uint64_t>(dst[i]) * 31u;
    v += static_cast<uint64_t>(a[i]) + static_cast<uint64_t>(b[i]) + static_cast<uint64_t>(k);
    dst[i] = static_cast<int64_t>(v);
  }
}

// Completes an asynchronous GPU operation from the stream's thread (a foreign thread to the
// engine), as a CUDA host function would.
void complete_from_stream(void* arg) {
  std::unique_ptr<CallbackOnComplete> done(static_cast<CallbackOnComplete*>(arg));
  (*done)();
}

// One step of the random workload: a compute step (dst and its operands on one device), or a
// copy of `a` into `dst` across devices.
struct Step {
  bool copy = false;
  bool async = false;  // a GPU compute step completed from a host function
  size_t dst = 0, a = 0, b = 0;
  int64_t k = 0;
  microseconds delay{0};  // how far the simulated device runs behind for this kernel
};

void push_step(World& w, const Step& s, bool with_delay) {
  const Buffer dst = w.buffers[s.dst], a = w.buffers[s.a], b = w.buffers[s.b];
  const microseconds delay = with_delay ? s.delay : microseconds(0);
  if (s.copy) {
    const FnProperty property = dst.on_gpu() && !a.on_gpu()   ? FnProperty::kCopyToDevice
                                : !dst.on_gpu() && a.on_gpu() ? FnProperty::kCopyFromDevice
                                                              : FnProperty::kNormal;
    const Device on = dst.on_gpu() ? dst.device : a.device;
    w.engine->push_sync(
        [dst, a](const RunContext& rc) {
          DeviceAPI::get(DeviceType::kCUDA)
              ->copy(dst.data, dst.device, a.data, a.device, kBytes, rc.stream);
        },
        on, {a.var}, {dst.var}, property, 0, "copy");
    return;
  }
  if (!dst.on_gpu()) {
    w.engine->push_sync(
        [dst, a, b, k = s.k](const RunContext&) { combine(dst.data, a.data, b.data, k); },
        dst.device, {a.var, b.var}, {dst.var}, FnProperty::kNormal, 0, "combine_cpu");
    return;
  }
  auto kernel = [dst, a, b, k = s.k] { combine(dst.data, a.data, b.data, k); };
  if (s.async) {
    w.engine->push_async(
        [kernel, delay](const RunContext& rc, CallbackOnComplete done) {
          sim().launch(rc.stream, kernel, delay);
          sim().launch_host_func(rc.stream, &complete_from_stream, new CallbackOnComplete(done));
        },
        dst.device, {a.var, b.var}, {dst.var}, FnProperty::kNormal, 0, "combine_async");
    return;
  }
  w.engine->push_sync(
      [kernel, delay](const RunContext& rc) { sim().launch(rc.stream, kernel, delay); }, dst.device,
      {a.var, b.var}, {dst.var}, FnProperty::kNormal, 0, "combine_gpu");
}

std::vector<Step> random_steps(int count, int cpu, int gpu, uint64_t seed) {
  std::mt19937_64 rng(seed);
  // The buffers of each device: the CPU, cuda:0, cuda:1 (World's layout).
  std::vector<std::vector<size_t>> groups(3);
  for (int i = 0; i < cpu + gpu; ++i) {
    groups[i < cpu ? 0 : 1 + (i - cpu) % 2].push_back(static_cast<size_t>(i));
  }
  auto group_of = [&](size_t i) { return static_cast<int>(i) < cpu ? 0 : 1 + (i - cpu) % 2; };
  auto pick = [&](const std::vector<size_t>& from) { return from[rng() % from.size()]; };
  const size_t n = static_cast<size_t>(cpu + gpu);
  std::vector<Step> steps;
  while (static_cast<int>(steps.size()) < count) {
    Step s;
    s.dst = rng() % n;
    s.k = static_cast<int64_t>(rng() % 1000);
    s.delay = microseconds(rng() % 3 == 0 ? rng() % 200 : 0);
    const std::vector<size_t>& same = groups[static_cast<size_t>(group_of(s.dst))];
    if (rng() % 4 == 0) {
      s.copy = true;
      s.a = rng() % n;
      if (s.a == s.dst || (group_of(s.a) == 0 && group_of(s.dst) == 0)) continue;
      s.b = s.a;
    } else {
      s.a = pick(same);
      s.b = pick(same);
      if (s.a == s.dst || s.b == s.dst) continue;  // operands distinct from dst
      s.async = group_of(s.dst) != 0 && rng() % 4 == 0;
    }
    steps.push_back(s);
  }
  return steps;
}

TEST_F(SimGpuEngine, RandomWorkloadOfCpuAndGpuVarsMatchesTheSynchronousEngine) {
  constexpr int kCpu = 4, kGpu = 6;
  for (uint64_t seed : {1u, 2u, 3u}) {
    const std::vector<Step> steps = random_steps(300, kCpu, kGpu, seed);
    World reference(EngineKind::kSync, kCpu, kGpu, 1);
    for (const Step& s : steps) push_step(reference, s, /*with_delay=*/false);
    reference.engine->wait_for_all();
    for (int streams : {1, 3}) {
      World threaded(EngineKind::kThreaded, kCpu, kGpu, streams);
      for (const Step& s : steps) push_step(threaded, s, /*with_delay=*/true);
      run_with_deadline("wait_for_all", [&] { threaded.engine->wait_for_all(); });
      for (size_t i = 0; i < threaded.buffers.size(); ++i) {
        const int64_t* got = threaded.buffers[i].data;
        const int64_t* want = reference.buffers[i].data;
        ASSERT_EQ(std::vector<int64_t>(got, got + kElems),
                  std::vector<int64_t>(want, want + kElems))
            << "buffer " << i << ", seed " << seed << ", " << streams << " compute streams";
      }
    }
  }
}

TEST_F(SimGpuEngine, ReadersOnOtherStreamsSeeTheSlowWritersValue) {
  // A slow kernel writes X; then independent operations each copy X into their own Y. Each Y is
  // first written by an operation of its own, and such operations (touching no recent GPU work)
  // take the compute streams in turn; a reader goes to the stream that last wrote its Y (Note
  // [GPU stream choice]), so most readers run on another stream than the writer of X and must
  // wait for its event on the device.
  World w(EngineKind::kThreaded, 0, 9, 4);
  for (size_t i = 0; i < w.buffers.size(); ++i) w.buffers[i].device = Device::cuda(0);
  for (size_t i = 1; i < w.buffers.size(); ++i) {
    const Buffer y = w.buffers[i];
    w.engine->push_sync(
        [y](const RunContext& rc) { sim().launch(rc.stream, [y] { y.data[0] = -1; }); }, y.device,
        {}, {y.var}, FnProperty::kNormal, 0, "init_y");
  }
  run_with_deadline("wait_for_all", [&] { w.engine->wait_for_all(); });
  const int64_t waits_before = sim().cross_stream_waits();
  auto mismatches = std::make_shared<std::atomic<int>>(0);
  const Buffer x = w.buffers[0];
  for (int64_t round = 0; round < 10; ++round) {
    w.engine->push_sync(
        [x, round](const RunContext& rc) {
          sim().launch(
              rc.stream,
              [x, round] {
                for (int64_t j = 0; j < kElems; ++j) x.data[j] = round * 100 + j;
              },
              kSlow);
        },
        x.device, {}, {x.var}, FnProperty::kNormal, 0, "slow_write");
    for (size_t i = 1; i < w.buffers.size(); ++i) {
      const Buffer y = w.buffers[i];
      w.engine->push_sync(
          [x, y, round, mismatches](const RunContext& rc) {
            sim().launch(rc.stream, [x, y, round, mismatches] {
              for (int64_t j = 0; j < kElems; ++j) {
                if (x.data[j] != round * 100 + j) mismatches->fetch_add(1);
                y.data[j] = x.data[j];
              }
            });
          },
          y.device, {x.var}, {y.var}, FnProperty::kNormal, 0, "read_x");
    }
  }
  run_with_deadline("wait_for_all", [&] { w.engine->wait_for_all(); });
  EXPECT_EQ(mismatches->load(), 0) << "a reader's kernel ran before the writer's kernel finished";
  for (size_t i = 1; i < w.buffers.size(); ++i) {
    for (int64_t j = 0; j < kElems; ++j) ASSERT_EQ(w.buffers[i].data[j], 900 + j) << i;
  }
  EXPECT_GT(sim().cross_stream_waits(), waits_before) << "no reader ran on another stream";
}

// A kernel writing `value` into every element of `b` on the operation's stream after kSlow.
void push_slow_write(Engine& engine, const Buffer& b, int64_t value) {
  engine.push_sync(
      [b, value](const RunContext& rc) {
        sim().launch(
            rc.stream,
            [b, value] {
              for (int64_t j = 0; j < kElems; ++j) b.data[j] = value;
            },
            kSlow);
      },
      b.device, {}, {b.var}, FnProperty::kNormal, 0, "slow_write");
}

TEST_F(SimGpuEngine, CpuWorkWaitsAndDeletersRunOnlyAfterTheKernelsOfTheirVariables) {
  World w(EngineKind::kThreaded, 1, 2, 2);
  const Buffer c = w.buffers[0], g = w.buffers[1];
  for (int round = 0; round < 5; ++round) {
    // A CPU operation reading what a slow kernel writes (held by the event poller).
    push_slow_write(*w.engine, g, 40 + round);
    w.engine->push_sync([c, g](const RunContext&) { c.data[0] = g.data[0]; }, Device::cpu(),
                        {g.var}, {c.var}, FnProperty::kNormal, 0, "cpu_reader");
    run_with_deadline("wait_for_var", [&] { w.engine->wait_for_var(c.var); });
    EXPECT_EQ(c.data[0], 40 + round) << "the CPU reader ran before the kernel";
    // wait_for_var of the kernel's variable.
    push_slow_write(*w.engine, g, 50 + round);
    run_with_deadline("wait_for_var", [&] { w.engine->wait_for_var(g.var); });
    EXPECT_EQ(g.data[kElems - 1], 50 + round) << "wait_for_var returned before the kernel";
  }
  for (int round = 0; round < 5; ++round) {
    // delete_var after a slow kernel writing the variable and a slow kernel reading it.
    auto data = std::make_shared<std::vector<int64_t>>(kElems, 0);
    const Buffer v{Device::cuda(0), data->data(), w.engine->new_var()};
    const Buffer out = w.buffers[2];
    push_slow_write(*w.engine, v, 60 + round);
    auto read_done = std::make_shared<std::atomic<bool>>(false);
    w.engine->push_sync(
        [v, out, read_done](const RunContext& rc) {
          sim().launch(
              rc.stream,
              [v, out, read_done] {
                for (int64_t j = 0; j < kElems; ++j) out.data[j] = v.data[j];
                read_done->store(true);
              },
              kSlow);
        },
        out.device, {v.var}, {out.var}, FnProperty::kNormal, 0, "slow_read");
    auto seen = std::make_shared<int64_t>(-1);
    auto reader_finished = std::make_shared<bool>(false);
    w.engine->delete_var(v.var, [data, seen, read_done, reader_finished](const RunContext&) {
      *seen = (*data)[0];
      *reader_finished = read_done->load();
      std::vector<int64_t>().swap(
          *data);  // frees the memory: a late kernel would touch freed memory
    });
    run_with_deadline("wait_for_all", [&] { w.engine->wait_for_all(); });
    EXPECT_EQ(*seen, 60 + round) << "the deleter ran before the kernel writing the variable";
    EXPECT_TRUE(*reader_finished) << "the deleter ran before the kernel reading the variable";
    EXPECT_EQ(out.data[0], 60 + round);
  }
}

// Note [Stream-ordered frees]: the deleter of device memory (delete_var_on) is a GPU operation.
// It runs with a stream current, before the device has run the variable's work, and whatever it
// queues on that stream (the pool's free, here a check that frees the memory) runs after all of
// that work: a slow writer, slow readers spread over three compute streams and a copy-out.
TEST_F(SimGpuEngine, DeviceMemoryDeletersAreOrderedBehindTheVariablesWorkOnEveryStream) {
  World w(EngineKind::kThreaded, 1, 0, 3);
  const Buffer host = w.buffers[0];
  const Device gpu = Device::cuda(0);
  constexpr int kReaders = 4;
  for (int round = 0; round < 5; ++round) {
    auto data = std::make_shared<std::vector<int64_t>>(kElems, 0);
    const Buffer v{gpu, data->data(), w.engine->new_var()};
    push_slow_write(*w.engine, v, 70 + round);
    auto reads = std::make_shared<std::atomic<int>>(0);
    std::vector<VarHandle> outs;
    for (int r = 0; r < kReaders; ++r) {
      outs.push_back(w.engine->new_var());
      w.engine->push_sync(
          [v, reads](const RunContext& rc) {
            sim().launch(
                rc.stream, [v, reads] { reads->fetch_add(v.data[0] >= 70 ? 1 : 100); }, kSlow);
          },
          gpu, {v.var}, {outs.back()}, FnProperty::kNormal, 0, "slow_read");
    }
    w.engine->push_sync(
        [v, host](const RunContext& rc) {
          sim().copy(host.data, Device::cpu(), v.data, v.device, kElems * sizeof(int64_t),
                     rc.stream);
        },
        gpu, {v.var}, {host.var}, FnProperty::kCopyFromDevice, 0, "copy_out");
    auto verdict = std::make_shared<std::atomic<int>>(-1);
    auto ran_on_its_stream = std::make_shared<std::atomic<bool>>(false);
    const int64_t want = 70 + round;
    w.engine->delete_var_on(
        v.var, gpu, [data, reads, verdict, ran_on_its_stream, want](const RunContext& rc) {
          ran_on_its_stream->store(rc.stream.handle != nullptr &&
                                   current_stream(Device::cuda(0)).handle == rc.stream.handle);
          sim().launch(rc.stream, [data, reads, verdict, want] {
            verdict->store((*data)[0] == want && reads->load() == kReaders ? 1 : 0);
            std::vector<int64_t>().swap(*data);  // the free: a late kernel would touch freed memory
          });
        });
    run_with_deadline("wait_for_all", [&] { w.engine->wait_for_all(); });
    EXPECT_TRUE(ran_on_its_stream->load()) << "the deleter ran without its stream current";
    EXPECT_EQ(verdict->load(), 1) << "the free was queued before the variable's work completed";
    EXPECT_EQ(host.data[kElems - 1], want);
    for (VarHandle o : outs) w.engine->delete_var(o);
  }
}

TEST_F(SimGpuEngine, RenewedGpuVariableOrdersItsFirstOperationsBehindTheOldKernel) {
  enum class Next { kGpuWrite, kCopyToDevice, kCpuWrite };
  for (Next next : {Next::kGpuWrite, Next::kCopyToDevice, Next::kCpuWrite}) {
    SCOPED_TRACE(static_cast<int>(next));
    World w(EngineKind::kThreaded, 1, 1, 3);
    const Buffer src = w.buffers[0];
    Buffer g = w.buffers[1];
    for (int64_t j = 0; j < kElems; ++j) src.data[j] = 99, g.data[j] = 0;
    // The old array's kernel stays queued until `release`: the stream cannot pass it.
    auto release = std::make_shared<Notification>();
    w.engine->push_sync(
        [g, release](const RunContext& rc) {
          sim().launch(rc.stream, [g, release] {
            EXPECT_TRUE(release->wait_for());
            for (int64_t j = 0; j < kElems; ++j) g.data[j] = 7;
          });
        },
        g.device, {}, {g.var}, FnProperty::kNormal, 0, "old_kernel");
    // The operation completes once its kernel is queued; then the variable can be renewed.
    VarHandle renewed;
    run_with_deadline("renew_var", [&] {
      while (!(renewed = w.engine->renew_var(g.var, /*device_memory=*/true))) {
        std::this_thread::sleep_for(microseconds(100));
      }
    });
    g.var = renewed;
    w.buffers[1].var = renewed;  // World deletes it
    int64_t expect = 0;
    switch (next) {
      case Next::kGpuWrite:
        expect = 71;
        w.engine->push_sync(
            [g](const RunContext& rc) {
              sim().launch(rc.stream, [g] {
                for (int64_t j = 0; j < kElems; ++j) g.data[j] = g.data[j] * 10 + 1;
              });
            },
            g.device, {}, {g.var}, FnProperty::kNormal, 0, "new_kernel");
        break;
      case Next::kCopyToDevice:  // on the copy stream: another stream than the old kernel's
        expect = 99;
        w.engine->push_sync(
            [g, src](const RunContext& rc) {
              DeviceAPI::get(DeviceType::kCUDA)
                  ->copy(g.data, g.device, src.data, src.device, kBytes, rc.stream);
            },
            g.device, {src.var}, {g.var}, FnProperty::kCopyToDevice, 0, "h2d");
        break;
      case Next::kCpuWrite:  // off the GPU: held by the event poller
        expect = 72;
        w.engine->push_sync(
            [g](const RunContext&) {
              for (int64_t j = 0; j < kElems; ++j) g.data[j] = g.data[j] * 10 + 2;
            },
            Device::cpu(), {}, {g.var}, FnProperty::kNormal, 0, "cpu_write");
        break;
    }
    auto seen = std::make_shared<int64_t>(-1);
    w.engine->push_sync([g, seen](const RunContext&) { *seen = g.data[kElems - 1]; }, Device::cpu(),
                        {g.var}, {}, FnProperty::kNormal, 0, "cpu_read");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // time to run ahead, if wrong
    release->notify();
    run_with_deadline("wait_for_all", [&] { w.engine->wait_for_all(); });
    EXPECT_EQ(*seen, expect);
    for (int64_t j = 0; j < kElems; ++j) ASSERT_EQ(g.data[j], expect) << j;
    EXPECT_EQ(w.engine->var_version(g.var), 1u);
  }
}

TEST_F(SimGpuEngine, AnErrorOfAGpuOperationReachesItsReadersAndTheEngineStaysUsable) {
  World w(EngineKind::kThreaded, 1, 2, 2);
  const Buffer c = w.buffers[0], g = w.buffers[1], h = w.buffers[2];
  push_slow_write(*w.engine, g, 1);
  w.engine->push_sync(
      [](const RunContext& rc) {
        sim().launch(rc.stream, [] {});
        throw TestFailure("bad_kernel: launch failed");
      },
      g.device, {}, {g.var}, FnProperty::kNormal, 0, "bad_kernel");
  std::atomic<int> ran{0};
  w.engine->push_sync([&ran](const RunContext&) { ran.fetch_add(1); }, Device::cpu(), {g.var},
                      {c.var}, FnProperty::kNormal, 0, "cpu_reader");
  w.engine->push_sync(
      [&ran](const RunContext& rc) {
        ran.fetch_add(1);
        sim().launch(rc.stream, [] {});
      },
      h.device, {g.var}, {h.var}, FnProperty::kNormal, 0, "gpu_reader");
  for (VarHandle reader : {c.var, h.var}) {
    try {
      run_with_deadline("wait_for_var", [&] { w.engine->wait_for_var(reader); });
      ADD_FAILURE() << "the GPU operation's error did not reach a reader";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("bad_kernel"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(ran.load(), 0);
  EXPECT_THROW(w.engine->wait_for_all(), EngineError);
  // Still usable, on the same variable.
  push_slow_write(*w.engine, g, 5);
  w.engine->push_sync([c, g](const RunContext&) { c.data[0] = g.data[0]; }, Device::cpu(), {g.var},
                      {c.var}, FnProperty::kNormal, 0, "cpu_reader");
  run_with_deadline("wait_for_all", [&] { w.engine->wait_for_all(); });
  EXPECT_EQ(c.data[0], 5);
}

// Host memory that GPU work touched (a pinned buffer a copy read) is never renewed: the new
// state's host code would write it without the engine. Device memory is (its marks stay).
TEST_F(SimGpuEngine, RenewalKeepsGpuMarksOnlyForDeviceMemory) {
  World w(EngineKind::kThreaded, 1, 1, 1);
  Buffer host = w.buffers[0], dev = w.buffers[1];
  dev.device = Device::cuda(0);
  w.engine->push_sync(
      [host, dev](const RunContext& rc) {
        sim().copy(dev.data, dev.device, host.data, Device::cpu(), kElems * sizeof(int64_t),
                   rc.stream);
      },
      dev.device, {host.var}, {dev.var}, FnProperty::kCopyToDevice, 0, "copy_in");
  run_with_deadline("wait_for_all", [&] { w.engine->wait_for_all(); });
  EXPECT_FALSE(w.engine->renew_var(host.var)) << "a host variable a copy read was renewed";
  EXPECT_FALSE(w.engine->renew_var(dev.var)) << "device memory renewed as host memory";
  VarHandle fresh = w.engine->renew_var(dev.var, /*device_memory=*/true);
  ASSERT_TRUE(fresh);
  w.buffers[1].var = fresh;  // World deletes it
}

TEST_F(SimGpuEngine, WaitForAllWaitsForTheStreamsToDrain) {
  World w(EngineKind::kThreaded, 0, 6, 3);
  auto host_funcs = std::make_shared<std::atomic<int>>(0);
  for (int round = 0; round < 5; ++round) {
    for (const Buffer& b : w.buffers) {
      w.engine->push_sync(
          [b, host_funcs](const RunContext& rc) {
            DeviceAPI* api = DeviceAPI::get(DeviceType::kCUDA);
            api->memset(b.data, 0, kBytes, rc.stream);
            sim().launch(
                rc.stream,
                [b] {
                  for (int64_t j = 0; j < kElems; ++j) b.data[j] += j + 1;
                },
                microseconds(500));
            api->launch_host_func(
                rc.stream, [](void* arg) { static_cast<std::atomic<int>*>(arg)->fetch_add(1); },
                host_funcs.get());
          },
          b.device, {}, {b.var}, FnProperty::kNormal, 0, "memset_and_fill");
    }
  }
  run_with_deadline("wait_for_all", [&] { w.engine->wait_for_all(); });
  EXPECT_EQ(sim().unfinished_work(), 0);
  EXPECT_EQ(host_funcs->load(), 5 * 6);
  for (const Buffer& b : w.buffers) {
    for (int64_t j = 0; j < kElems; ++j) ASSERT_EQ(b.data[j], j + 1);
  }
}

TEST_F(SimGpuEngine, EngineDestructionWaitsForQueuedKernelsAndDestroysItsStreams) {
  const int streams_before = sim().live_streams();
  auto data = std::make_shared<std::vector<int64_t>>(kElems, 0);
  {
    auto engine = Engine::create(config_of(EngineKind::kThreaded, 2));
    const Buffer g{Device::cuda(1), data->data(), engine->new_var()};
    push_slow_write(*engine, g, 11);
    EXPECT_GT(sim().live_streams(), streams_before);
    engine->delete_var(g.var);
    run_with_deadline("engine destruction", [&] { engine.reset(); });
  }
  EXPECT_EQ((*data)[0], 11);
  EXPECT_EQ(sim().live_streams(), streams_before);
}

TEST(SimGpuDevice, AStreamWaitingForAnEventRunsAfterTheEventsWork) {
  SimGpu gpu(1);
  const Stream a = gpu.create_stream(Device::cuda(0)), b = gpu.create_stream(Device::cuda(0));
  int64_t value = 0, seen = -1;
  Event never = gpu.create_event(Device::cuda(0));
  EXPECT_TRUE(never.query()) << "an event never recorded is complete";
  auto release = std::make_shared<Notification>();
  gpu.launch(a, [&value, release] {
    EXPECT_TRUE(release->wait_for());
    value = 3;
  });
  Event done = gpu.create_event(Device::cuda(0));
  done.record(a);
  done.block(b);
  gpu.launch(b, [&] { seen = value; });
  EXPECT_FALSE(done.query());
  release->notify();
  gpu.synchronize(b);
  EXPECT_TRUE(done.query());
  EXPECT_EQ(seen, 3);
  gpu.destroy_stream(a);
  gpu.destroy_stream(b);
}

}  // namespace
}  // namespace weft::testing
