// Uses the installed weft headers and libraries: a short dependent workload on the engine, then
// an imperative operator call with autograd through NDArray.
#include <cstdio>

#include "engine/engine.h"
#include "ndarray/autograd.h"
#include "ndarray/ops.h"

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

  auto x = weft::NDArray::from_vector<float>(weft::Shape{2}, {1, 2});
  x.attach_grad();
  weft::NDArray y;
  {
    weft::autograd::RecordScope record;
    y = weft::op::sum(x * x);
  }
  y.backward();
  auto g = x.grad().to_vector<float>();
  std::printf("installed weft: d/dx sum(x*x) at (1, 2) = (%g, %g)\n", g[0], g[1]);
  return value == 100 && g[0] == 2 && g[1] == 4 ? 0 : 1;
}
