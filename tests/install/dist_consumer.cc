// Links weft::dist from the installed package (a C++-only project) and runs a group of one: an
// allreduce on a process alone is a copy, so the sum of one rank is the input.
#include <cstdio>
#include <vector>

#include "dist/dist.h"
#include "ndarray/ndarray.h"

int main() {
  weft::dist::init();
  auto x = weft::NDArray::from_vector<float>(weft::Shape{3}, {1, 2, 3});
  auto y = weft::NDArray::zeros(weft::Shape{3});
  weft::dist::allreduce(x, y, weft::dist::ReduceOp::kSum);
  const auto values = y.to_vector<float>();
  std::printf("installed weft::dist: %s, rank %d of %d, allreduce [%g %g %g]\n",
              weft::dist::backend().c_str(), weft::dist::rank(), weft::dist::size(), values[0],
              values[1], values[2]);
  weft::dist::shutdown();
  return values == std::vector<float>{1, 2, 3} ? 0 : 1;
}
