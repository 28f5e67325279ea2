// Runtime teardown and lifetimes (docs/LIFETIMES.md): shutdown() and Runtime::reset() with many
// kernels still queued complete (a watchdog fails the test instead of hanging), arrays outlive
// shutdown() and free safely, and a program that exits without shutdown() with work still queued
// exits cleanly (run as a child process, many times).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ndarray/autograd.h"
#include "ndarray/ndarray.h"
#include "ndarray/ops.h"
#include "ndarray/runtime.h"
#include "tests/ndarray/child_process.h"

namespace weft {
namespace {

using testing::run_child;
using testing::Watchdog;

constexpr auto kDeadlockLimit = std::chrono::seconds(60);

// Queues a gate (an operation that blocks until released) writing `a`, then `chain` kernels
// depending on it, and `probes` engine operations that call Runtime::get() as kernels do and
// count themselves. Returns the release function.
struct QueuedWork {
  std::promise<void> release;
  std::atomic<int> probes_run{0};
  NDArray result;
};

void queue_work(QueuedWork& work, NDArray& a, int chain, int probes) {
  std::shared_future<void> gate = work.release.get_future().share();
  Engine& engine = Runtime::get().engine();
  engine.push_sync([gate](const RunContext&) { gate.wait(); }, Device::cpu(), {}, {a.var()});
  NDArray x = a;
  for (int i = 0; i < chain; ++i) x = x + 1.0;
  for (int i = 0; i < probes; ++i) {
    engine.push_sync(
        [&work](const RunContext&) {
          Runtime& rt = Runtime::get();  // what every kernel does (intra-op threads)
          const int threads = rt.kernel_started();
          rt.kernel_finished();
          if (threads >= 1) work.probes_run.fetch_add(1);
        },
        Device::cpu(), {a.var()}, {});
  }
  work.result = x;
}

TEST(RuntimeLifetime, ShutdownWithManyKernelsQueuedCompletesThem) {
  NDArray a = NDArray::zeros(Shape{1024});
  QueuedWork work;
  queue_work(work, a, 300, 300);
  {
    Watchdog watchdog(kDeadlockLimit, "shutdown() with kernels queued");
    std::thread releaser([&work] {
      // Give shutdown() time to start waiting (ordering help only; nothing asserts on time).
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      work.release.set_value();
    });
    shutdown();
    releaser.join();
  }
  EXPECT_FALSE(Runtime::alive());
  EXPECT_EQ(work.probes_run.load(), 300) << "queued operations were dropped instead of completed";
  // Arrays of the dead runtime are released afterwards (docs/LIFETIMES.md).
  work.result = NDArray();
  a = NDArray();
  // A new runtime comes up on next use and computes correctly.
  NDArray b = NDArray::from_vector<float>(Shape{3}, {1, 2, 3}) * 2.0;
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

TEST(RuntimeLifetime, ResetWithManyKernelsQueuedCompletesThem) {
  NDArray a = NDArray::zeros(Shape{1024});
  const uint64_t old_generation = Runtime::get().generation();
  QueuedWork work;
  queue_work(work, a, 300, 300);
  {
    Watchdog watchdog(kDeadlockLimit, "Runtime::reset() with kernels queued");
    std::thread releaser([&work] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      work.release.set_value();
    });
    RuntimeConfig config;
    config.engine.kind = EngineKind::kThreaded;
    config.engine.cpu_workers = 2;
    Runtime::reset(config);
    releaser.join();
  }
  EXPECT_EQ(work.probes_run.load(), 300);
  EXPECT_NE(Runtime::get().generation(), old_generation);
  EXPECT_EQ(Runtime::get().engine().num_workers(Device::cpu()), 2);
  NDArray b = NDArray::from_vector<float>(Shape{2}, {5, 7}) - 1.0;
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{4, 6}));
  work.result = NDArray();
  a = NDArray();
  Runtime::reset(RuntimeConfig{});
}

TEST(RuntimeLifetime, ShutdownAndResetRefuseToRunInsideAnOperation) {
  std::atomic<int> refused{0};
  Engine& engine = Runtime::get().engine();
  VarHandle v = engine.new_var();
  engine.push_sync(
      [&refused](const RunContext&) {
        try {
          shutdown();
        } catch (const Error&) {
          ++refused;
        }
        try {
          Runtime::reset(RuntimeConfig{});
        } catch (const Error&) {
          ++refused;
        }
      },
      Device::cpu(), {}, {v});
  engine.wait_for_var(v);
  engine.delete_var(v);
  EXPECT_EQ(refused.load(), 2);
  EXPECT_TRUE(Runtime::alive());
}

TEST(RuntimeLifetime, ArraysOutliveShutdownAndAreFreedAfterwards) {
  std::vector<NDArray> arrays;
  for (int i = 0; i < 60; ++i) {
    // Small arrays share pool segments; the large ones get segments of their own.
    const int64_t n = (i % 6 == 0) ? (int64_t{1} << 19) : 17 * (i + 1);
    arrays.push_back(NDArray::uniform(Shape{n}));
  }
  NDArray x = NDArray::uniform(Shape{32, 32});
  x.attach_grad();
  NDArray loss;
  {
    autograd::RecordScope record;
    loss = op::sum(x * x);
  }
  NDArray view = arrays[0].slice(10, 20);
  for (int i = 0; i < 50; ++i) arrays[i % 60] = arrays[i % 60] * 1.5;  // still queued at shutdown
  shutdown();
  EXPECT_FALSE(Runtime::alive());
  // Half now, with no runtime at all...
  arrays.resize(30);
  view = NDArray();
  // ...and the rest while a new runtime allocates from its own pool.
  NDArray fresh = NDArray::from_vector<float>(Shape{4}, {1, 2, 3, 4}) + 1.0;
  EXPECT_EQ(fresh.to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
  arrays.clear();
  loss = NDArray();
  x = NDArray();
  NDArray again = NDArray::from_vector<float>(Shape{2}, {1, 1}) * 3.0;
  EXPECT_EQ(again.to_vector<float>(), (std::vector<float>{3, 3}));
}

// ---- exit without shutdown() ------------------------------------------------------------------

constexpr const char* kChildEnv = "WEFT_LIFETIME_CHILD";
constexpr const char* kChildMarker = "lifetime child: work queued";

// The child: queues oneDNN and elementwise kernels and slow engine operations, keeps arrays alive
// in static storage, and exits without shutdown() while the work is still queued.
TEST(RuntimeLifetimeExitChild, QueuesWorkAndExits) {
  const char* mode = std::getenv(kChildEnv);
  if (mode == nullptr)
    GTEST_SKIP() << "runs only as the child of ExitWithoutShutdownWithWorkQueuedIsClean";
  static NDArray kept_in_static_storage = NDArray::uniform(Shape{1000});
  NDArray x = NDArray::uniform(Shape{64, 1, 28, 28});
  NDArray w = NDArray::normal(Shape{10, 784}, 0, 0.01);
  NDArray b = NDArray::zeros(Shape{10});
  std::vector<NDArray> results;
  for (int i = 0; i < 40; ++i) {
    results.push_back(op::pooling(x, Shape{2, 2}, "max", Shape{2, 2}));
    results.push_back(op::fully_connected(x, w, b, 10));
    x = x * 1.0001;
    kept_in_static_storage = kept_in_static_storage + 1.0;
    Runtime::get().engine().push_sync(
        [](const RunContext&) { std::this_thread::sleep_for(std::chrono::milliseconds(1)); },
        Device::cpu(), {x.var()}, {});
  }
  std::printf("%s\n", kChildMarker);
  std::fflush(stdout);
  if (std::string(mode) == "exit") std::exit(0);
  // "return": the test ends, main returns, arrays in `results` are destroyed with work queued.
}

TEST(RuntimeLifetime, ExitWithoutShutdownWithWorkQueuedIsClean) {
  const int runs = 20;
  for (int run = 0; run < runs; ++run) {
    const std::string mode = run % 2 == 0 ? "exit" : "return";
    std::string output;
    const int status =
        run_child("RuntimeLifetimeExitChild.QueuesWorkAndExits", kChildEnv, mode, output);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "run " << run << " (" << mode << "): " << testing::describe_status(status) << "\n"
        << output;
    ASSERT_NE(output.find(kChildMarker), std::string::npos) << "the child did not run its body:\n"
                                                            << output;
  }
}

}  // namespace
}  // namespace weft
