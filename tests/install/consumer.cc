// Uses the installed weft headers and libraries: a short dependent workload on the engine.
#include <cstdio>

#include "engine/engine.h"

int main() {
  auto engine = weft::Engine::create(weft::EngineConfig{});
  weft::VarHandle var = engine->new_var();
  int value = 0;
  for (int i = 0; i < 100; ++i) {
    engine->push([&value](const weft::RunContext&) { ++value; }, weft::Device::cpu(), {}, {var});
  }
  engine->wait_for_var(var);
  std::printf("installed weft: value=%d version=%llu\n", value,
              static_cast<unsigned long long>(engine->var_version(var)));
  engine->delete_var(var);
  engine->wait_for_all();
  return value == 100 ? 0 : 1;
}
