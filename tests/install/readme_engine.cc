// The README's engine and pooled-allocator examples, built against the installed package: two
// dependent operations, a variable deleted while work is pending, and a pool block handed back
// through the engine. The values are checked against what the code wrote.
#include <cstdio>
#include <cstring>

#include "engine/engine.h"
#include "memory/pooled_allocator.h"

int main() {
  int x_value = 0, y_value = 0;  // declared first: they outlive the engine and its queued work
  // ---- the README's engine code ----
  auto engine = weft::Engine::create();  // WEFT_ENGINE / WEFT_CPU_WORKERS / WEFT_PROFILE
  weft::VarHandle x = engine->new_var(), y = engine->new_var();
  engine->push(
      [&](const weft::RunContext&) {
        x_value = 21; /* write x */
      },
      weft::Device::cpu(), {}, {x});
  engine->push(
      [&](const weft::RunContext&) {
        y_value = 2 * x_value; /* read x, write y */
      },
      weft::Device::cpu(), {x}, {y});
  engine->wait_for_var(y);  // rethrows an error that reached y

  // ---- the README's pool code ----
  weft::PooledAllocator pool(weft::cpu_allocator());  // best fit by default; see docs/MEMORY.md
  weft::DataPtr block = pool.allocate(1 << 20);
  unsigned char* bytes = static_cast<unsigned char*>(block.get());
  for (int i = 0; i < 64; ++i) {
    engine->push([bytes, i](const weft::RunContext&) { std::memset(bytes, i, 1 << 20); },
                 weft::Device::cpu(), {}, {x});
  }
  engine->delete_var(x, [b = std::move(block)](const weft::RunContext&) mutable { b.reset(); });
  engine->wait_for_all();

  int failures = 0;
  if (y_value != 42) {
    std::fprintf(stderr, "readme_engine: y = %d, expected 42\n", y_value);
    ++failures;
  }
  const weft::PoolStats stats = pool.stats();
  if (stats.in_use_bytes != 0 || stats.frees != 1) {
    std::fprintf(stderr, "readme_engine: the block was not returned (in use %zu, frees %llu)\n",
                 stats.in_use_bytes, static_cast<unsigned long long>(stats.frees));
    ++failures;
  }
  // Work still queued on y when main returns: the engine is destroyed then and must drain it.
  for (int i = 0; i < 1000; ++i) {
    engine->push([&y_value](const weft::RunContext&) { ++y_value; }, weft::Device::cpu(), {}, {y});
  }
  engine->delete_var(y);
  if (failures != 0) return 1;
  std::printf("readme_engine: ok\n");
  return 0;
}
