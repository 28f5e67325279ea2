// `weft demo`: a tiled matrix product scheduled through the dependency engine, with scratch tiles
// from the pooled allocator freed through the engine, checked against a
// serial reference, with optional Chrome trace.
#include "tools/demo.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "base/profiler.h"
#include "engine/engine.h"
#include "memory/pooled_allocator.h"

namespace weft::tools {

namespace {

// Row-major n x n matrices split into t x t tiles of size b = n / t.
struct Tiled {
  int n, tiles, block;
  std::vector<float> data;
  Tiled(int n_, int tiles_) : n(n_), tiles(tiles_), block(n_ / tiles_), data(size_t(n_) * n_) {}
  float* at(int row, int col) { return &data[size_t(row) * n + col]; }
};

// C_ij += A_ik * B_kj on one tile triple.
void tile_multiply_add(Tiled& a, Tiled& b, Tiled& c, int i, int j, int k) {
  const int bs = a.block;
  for (int r = 0; r < bs; ++r) {
    float* c_row = c.at(i * bs + r, j * bs);
    const float* a_row = a.at(i * bs + r, k * bs);
    for (int p = 0; p < bs; ++p) {
      const float av = a_row[p];
      const float* b_row = b.at(k * bs + p, j * bs);
      for (int q = 0; q < bs; ++q) c_row[q] += av * b_row[q];
    }
  }
}

// One product C = A * B: every C tile accumulates into a scratch tile taken from the pool,
// k by k, then is copied out; the scratch tile goes back to the pool through delete_var once
// the copy (the last operation on it) has run.
double run_tiled(Engine& engine, PooledAllocator& pool, Tiled& a, Tiled& b, Tiled& c) {
  const int t = a.tiles;
  const int bs = a.block;
  std::vector<VarHandle> va(t * t), vb(t * t), vacc(t * t);
  for (auto* vars : {&va, &vb, &vacc})
    for (auto& v : *vars) v = engine.new_var();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < t; ++i) {
    for (int j = 0; j < t; ++j) {
      DataPtr scratch = pool.allocate(sizeof(float) * bs * bs);
      auto* acc = static_cast<float*>(scratch.get());
      VarHandle v = vacc[i * t + j];
      engine.push([acc, bs](const RunContext&) { std::fill_n(acc, bs * bs, 0.0f); }, Device::cpu(),
                  {}, {v}, FnProperty::kNormal, 0, "zero_tile");
      for (int k = 0; k < t; ++k) {
        engine.push(
            [&a, &b, acc, i, j, k, bs](const RunContext&) {
              for (int r = 0; r < bs; ++r) {
                float* acc_row = acc + r * bs;
                const float* a_row = a.at(i * bs + r, k * bs);
                for (int p = 0; p < bs; ++p) {
                  const float av = a_row[p];
                  const float* b_row = b.at(k * bs + p, j * bs);
                  for (int q = 0; q < bs; ++q) acc_row[q] += av * b_row[q];
                }
              }
            },
            Device::cpu(), {va[i * t + k], vb[k * t + j]}, {v}, FnProperty::kNormal, 0,
            "tile_gemm");
      }
      engine.push(
          [&c, acc, i, j, bs](const RunContext&) {
            for (int r = 0; r < bs; ++r) std::copy_n(acc + r * bs, bs, c.at(i * bs + r, j * bs));
          },
          Device::cpu(), {v}, {}, FnProperty::kNormal, 0, "store_tile");
      engine.delete_var(v,
                        [block = std::move(scratch)](const RunContext&) mutable { block.reset(); });
    }
  }
  engine.wait_for_all();
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (auto* vars : {&va, &vb})
    for (auto& v : *vars) engine.delete_var(v);
  engine.wait_for_all();
  return ms;
}

}  // namespace

int run_demo(const DemoOptions& options) {
  const int n = options.size, t = options.tiles;
  if (n <= 0 || t <= 0 || n % t != 0) {
    std::fprintf(stderr, "weft demo: --size (%d) must be a positive multiple of --tiles (%d)\n", n,
                 t);
    return 2;
  }
  Tiled a(n, t), b(n, t), c(n, t), reference(n, t);
  uint32_t seed = options.seed;
  auto next = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
  };
  for (auto& x : a.data) x = next();
  for (auto& x : b.data) x = next();

  // Serial reference in the same k-order per element, so results agree bit for bit.
  auto serial_start = std::chrono::steady_clock::now();
  for (int k = 0; k < t; ++k)
    for (int i = 0; i < t; ++i)
      for (int j = 0; j < t; ++j) tile_multiply_add(a, b, reference, i, j, k);
  double serial_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - serial_start)
          .count();

  EngineConfig config = EngineConfig::from_environment();
  if (options.workers > 0) config.cpu_workers = options.workers;
  if (!options.profile_path.empty()) {
    Profiler::global().clear();
    Profiler::global().start();
  }
  std::unique_ptr<Engine> engine = Engine::create(config);
  PooledAllocator pool(cpu_allocator());
  std::printf("weft demo: tiled matrix product %dx%d in %dx%d tiles (%d operations)\n", n, n, t, t,
              t * t * (t + 2));
  std::printf("engine: %s, %d CPU worker(s)\n",
              engine->kind() == EngineKind::kThreaded ? "threaded" : "sync",
              engine->num_workers(Device::cpu()));
  double best = 1e300;
  for (int rep = 0; rep < options.repeats; ++rep) {
    best = std::min(best, run_tiled(*engine, pool, a, b, c));
  }
  double max_diff = 0;
  for (size_t i = 0; i < c.data.size(); ++i)
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(c.data[i] - reference.data[i])));
  std::printf("serial: %.2f ms   engine (best of %d): %.2f ms   speedup %.2fx\n", serial_ms,
              options.repeats, best, serial_ms / best);
  EngineStats stats = engine->stats();
  std::printf("operations completed: %lld, live variables: %lld\n",
              static_cast<long long>(stats.completed_ops), static_cast<long long>(stats.live_vars));
  PoolStats pool_stats = pool.stats();
  std::printf(
      "scratch tiles from %s: %llu allocations, %llu cache hits, peak in use %s, "
      "reserved %s, all returned through delete_var: %s\n",
      pool.name().c_str(), static_cast<unsigned long long>(pool_stats.allocations),
      static_cast<unsigned long long>(pool_stats.hits),
      detail::format_bytes(pool_stats.peak_in_use_bytes).c_str(),
      detail::format_bytes(pool_stats.reserved_bytes).c_str(),
      pool_stats.in_use_bytes == 0 ? "yes" : "NO");
  std::printf("max |engine - serial| = %g -> %s\n", max_diff,
              max_diff == 0 ? "identical" : "MISMATCH");
  engine.reset();
  if (!options.profile_path.empty()) {
    Profiler::global().stop();
    Profiler::global().write_chrome_trace(options.profile_path);
    std::printf("trace: %s (%zu operations; open in https://ui.perfetto.dev)\n",
                options.profile_path.c_str(), Profiler::global().op_count());
  }
  return max_diff == 0 && pool_stats.in_use_bytes == 0 ? 0 : 1;
}

}  // namespace weft::tools
