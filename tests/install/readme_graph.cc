// The README's static-graph example (ResNet-18 from the bundled builders, bound and run through
// the executor), built against the installed package at batch 1 so that it is quick. Every
// parameter but the first convolution's weight is zero, so the classifier's logits are zero and
// the softmax output must be 1/1000 everywhere: an answer known without weft. Never calls
// weft::shutdown(), and returns with a forward pass still queued (docs/LIFETIMES.md).
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "graph/executor.h"
#include "graph/json.h"
#include "graph/models.h"

int main() {
  // ---- the README's code (batch 1 instead of 32) ----
  using namespace weft;
  auto g = std::make_shared<graph::Graph>(graph::models::build("resnet18").to_graph());
  graph::BindOptions opts;
  opts.inputs.shapes["data"] = Shape{1, 3, 224, 224};  // labels of loss heads are filled with zeros
  auto exec = graph::Executor::bind(g, opts);          // infer, plan, allocate the arena, cache ops
  NDArray w = exec->arg("conv0_weight");               // fill the weights (or pass arrays to bind)
  NDArray::uniform(w.shape(), -0.1, 0.1).copy_to(w);
  NDArray data = exec->arg("data");
  NDArray::uniform(data.shape()).copy_to(data);
  exec->forward();
  std::vector<float> probs = exec->outputs()[0].to_vector<float>();

  // ---- checks ----
  int failures = 0;
  if (probs.size() != 1000) {
    std::fprintf(stderr, "readme_graph: %zu outputs, expected 1000\n", probs.size());
    return 1;
  }
  for (size_t i = 0; i < probs.size(); ++i) {
    if (!(std::abs(probs[i] - 1e-3) <= 1e-6) && ++failures <= 5) {
      std::fprintf(stderr, "readme_graph: probs[%zu] = %.9g, expected 0.001\n", i, probs[i]);
    }
  }
  // Leave a second forward pass queued when main returns (the executor is destroyed then).
  exec->forward();
  if (failures != 0) return 1;
  std::printf("readme_graph: ok\n");
  return 0;
}
