// Input shapes of the MXNet model files in ../shared/models (see SOURCES.md there), per batch size,
// and the training setup used with them (gradient graph, wrt = learned parameters). Shared by the
// graph tests and the planner benchmark.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "graph/executor.h"
#include "graph/gradient.h"
#include "graph/infer.h"

namespace weft::testing {

/// One model file and the shapes of its inputs without the batch dimension.
struct ModelInputSpec {
  const char* file;
  const char* name;  ///< a short name for tables
  /// name -> dims after the batch dimension. A name ending in '#' stands for the variables
  /// "<name>0" ... "<name><steps - 1>" (an unrolled recurrence with one input per step).
  std::vector<std::pair<std::string, std::vector<int64_t>>> inputs;
  int steps = 0;
};

/// The 14 MXNet symbol files and what they are fed. Image models take their canonical input
/// size; the rest were read off the graph (the layers that fix each dimension are named).
inline const std::vector<ModelInputSpec>& mxnet_model_specs() {
  static const std::vector<ModelInputSpec> specs = {
      // MLP fixture of MXNet's legacy loader test: FullyConnected on flat vectors (MNIST size).
      {"apache__mxnet__save_000800.json", "mlp-000800", {{"data", {784}}}},
      // MTCNN P-Net: fully convolutional, trained on 12x12 crops.
      {"deepinsight__insightface__det1-symbol.json", "mtcnn-pnet", {{"data", {3, 12, 12}}}},
      {"pathak-ashutosh__plant-seeds-classification__resnet-50-symbol.json",
       "resnet50-v2",
       {{"data", {3, 224, 224}}}},
      // char-rnn, 129 steps of 3 LSTM layers: one token id per sequence and step ("data/t",
      // "label/t"); i2h/h2h have 2048 = 4 x 512 units, so the initial states are 512 wide.
      {"lucasjinreal__Char-Generator-LSTM__obama-symbol.json",
       "char-lstm",
       {{"data/#", {}},
        {"label/#", {}},
        {"l0_init_h", {512}},
        {"l0_init_c", {512}},
        {"l1_init_h", {512}},
        {"l1_init_c", {512}},
        {"l2_init_h", {512}},
        {"l2_init_c", {512}}},
       129},
      {"miaow1988__SqueezeNet_v1.2__model-symbol.json",
       "squeezenet-1.2",
       {{"data", {3, 224, 224}}}},
      {"KeyKy__mobilenet-mxnet__mobilenet_v2-symbol.json",
       "mobilenet-v2",
       {{"data", {3, 224, 224}}}},
      {"soeaver__mxnet-model__inception_v3-symbol.json", "inception-v3", {{"data", {3, 299, 299}}}},
      {"soeaver__mxnet-model__se-resnext50-32x4d-symbol.json",
       "se-resnext50",
       {{"data", {3, 224, 224}}}},
      {"apache__mxnet__test_mkldnn_test_mkldnn_model_model1.json",
       "vgg16-reduced",
       {{"data", {3, 224, 224}}}},
      // RetinaFace: the FPN's upsampled maps are cropped to the finer level; 640x640 as deployed.
      {"bogireddytejareddy__retinaface-pytorch__mnet.25-symbol.json",
       "retinaface-mnet25",
       {{"data", {3, 640, 640}}}},
      // CRNN: 80 rows become the 20 time steps (SliceChannel axis 2 after two 2x2 poolings); the
      // width must leave conv4 (kernel 3x2, no width padding) at least one column after the four
      // width-halving poolings: 32. LSTM layers of 100 units (400 = 4 x 100 gates); CTC labels
      // of 4 characters.
      {"Mengman__TensorRT_Tutorial__ocr-symbol.json",
       "crnn-ocr",
       {{"data", {1, 80, 32}},
        {"label", {4}},
        {"l0_init_h", {100}},
        {"l0_init_c", {100}},
        {"l1_init_h", {100}},
        {"l1_init_c", {100}},
        {"l2_init_h", {100}},
        {"l2_init_c", {100}},
        {"l3_init_h", {100}},
        {"l3_init_c", {100}}}},
      {"fqararyah__tvm-cuda-int8-benchmark__resnet18_v1-symbol.json",
       "resnet18-v1",
       {{"data", {3, 224, 224}}}},
      // Gluon MLP with deferred input width: MNIST vectors.
      {"kylehoffpauir__AdvOSBig__net-symbol.json", "gluon-mlp", {{"data", {784}}}},
      // MobileFaceNet: 112x112 aligned faces.
      {"MirrorYuChen__tvm_insightface__model-symbol.json",
       "mobilefacenet",
       {{"data", {3, 112, 112}}}},
  };
  return specs;
}

/// The file names of mxnet_model_specs(), in that order.
inline std::vector<std::string> mxnet_model_files() {
  std::vector<std::string> files;
  for (const ModelInputSpec& s : mxnet_model_specs()) files.push_back(s.file);
  return files;
}

/// Names tests over mxnet_model_files() by the model's short name, with characters gtest refuses
/// replaced: INSTANTIATE_TEST_SUITE_P's name generator.
struct ModelTestName {
  template <typename ParamInfo>
  std::string operator()(const ParamInfo& info) const {
    std::string name = mxnet_model_specs().at(info.index).name;
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return name;
  }
};

/// The inputs of model `file` at batch size `batch` (shapes with the batch dimension first).
/// Throws ValueError for a file not in the table.
inline graph::InferInputs model_inputs(std::string_view file, int64_t batch) {
  for (const ModelInputSpec& s : mxnet_model_specs()) {
    if (file != s.file) continue;
    graph::InferInputs in;
    for (const auto& [name, dims] : s.inputs) {
      std::vector<int64_t> full{batch};
      full.insert(full.end(), dims.begin(), dims.end());
      if (!name.empty() && name.back() == '#') {
        const std::string stem = name.substr(0, name.size() - 1);
        for (int t = 0; t < s.steps; ++t) in.shapes[stem + std::to_string(t)] = Shape(full);
      } else {
        in.shapes[name] = Shape(full);
      }
    }
    return in;
  }
  WEFT_THROW(ValueError) << "no input shapes known for model file '" << file << "'";
}

/// A graph ready to plan: the graph, its inference results and how many nodes are forward.
struct InferredGraph {
  graph::Graph graph;
  graph::InferResult inferred;
  uint32_t num_forward_nodes = 0;
};

/// The forward graph inferred for `inputs`.
inline InferredGraph inference_graph(const graph::Graph& forward,
                                     const graph::InferInputs& inputs) {
  InferredGraph out;
  out.graph = forward;
  out.inferred = graph::infer_shapes_types(forward, inputs, true);
  out.num_forward_nodes = static_cast<uint32_t>(forward.nodes.size());
  return out;
}

/// The training graph (forward + backward) inferred for `inputs`, as the executor binds it:
/// gradients with respect to every argument that is neither an input named in `inputs` nor a
/// loss head's label; head gradients take their heads' shapes and types.
inline InferredGraph training_graph(const graph::Graph& forward, const graph::InferInputs& inputs) {
  const std::vector<uint32_t> labels = graph::label_variables(forward);
  graph::GradientOptions options;
  for (uint32_t nid : forward.argument_nodes()) {
    if (std::binary_search(labels.begin(), labels.end(), nid)) continue;
    if (inputs.shapes.count(forward.nodes[nid].name) ||
        inputs.fixed_shapes.count(forward.nodes[nid].name))
      continue;
    options.wrt.push_back(nid);
  }
  WEFT_CHECK(!options.wrt.empty()) << "training graph: no learned parameters to differentiate";
  graph::GradientGraph grad = graph::build_gradient(forward, options);
  const graph::InferResult f = graph::infer_shapes_types(forward, inputs, true);
  graph::InferInputs in = inputs;
  for (size_t h = 0; h < grad.head_grad_nodes.size(); ++h) {
    if (grad.head_grad_nodes[h] < 0) continue;
    const uint32_t eid = forward.entry_id(forward.heads[h]);
    const std::string& name = grad.graph.nodes[grad.head_grad_nodes[h]].name;
    in.fixed_shapes[name] = f.shapes[eid];
    in.dtypes[name] = f.dtypes[eid];
  }
  InferredGraph out;
  out.num_forward_nodes = grad.num_forward_nodes;
  out.graph = std::move(grad.graph);
  out.inferred = graph::infer_shapes_types(out.graph, in, true);
  return out;
}

}  // namespace weft::testing
