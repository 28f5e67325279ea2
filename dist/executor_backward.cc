// Data-parallel backward of a bound graph (dist.h): the executor's backward, then one averaging
// allreduce per argument gradient, pushed right behind it so each overlaps with the rest.
#include <algorithm>

#include "dist/dist.h"
#include "graph/executor.h"

namespace weft::dist {

void data_parallel_backward(graph::Executor& exec, const std::vector<NDArray>& head_grads,
                            const std::vector<std::string>& skip) {
  exec.backward(head_grads);
  // Arguments are listed in graph order (inputs, then each layer's parameters as the forward
  // meets them); backward writes them roughly in reverse.
  std::vector<std::string> names = exec.arg_names();
  std::reverse(names.begin(), names.end());
  std::vector<std::pair<std::string, NDArray>> grads;
  for (const auto& name : names) {
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    NDArray g = exec.grad(name);
    if (!g.is_none()) grads.emplace_back(name, g);
  }
  allreduce_gradients(grads);
}

}  // namespace weft::dist
