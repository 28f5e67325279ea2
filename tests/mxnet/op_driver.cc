// weft_op_driver: runs operator cases described in JSON through weft's imperative API (forward,
// and backward with given head gradients) and writes the results as .npy, for tests/mxnet/.
//
// Usage: weft_op_driver CASES.json RESULTS.json
//
// CASES.json is a list of objects:
//   {"id": "conv/3", "op": "Convolution", "attrs": {"kernel": "(3, 3)", ...},
//    "inputs": ["a.npy", ...],            // every input, in the op's order
//    "is_train": false,                   // training mode (Dropout, BatchNorm batch statistics)
//    "backward": true,                    // record and run backward
//    "grad_inputs": [0, 1],               // inputs that get a gradient buffer (attach_grad)
//    "head_grads": ["hg0.npy", ...],      // one per visible output; "" means ones
//    "dump_inputs": [3, 4],               // inputs to save after the run (mutated aux states)
//    "out_prefix": "dir/conv_3_"}         // writes <prefix>out<i>.npy, grad<i>.npy, in<i>.npy
// RESULTS.json is a list of {"id", "ok", "error", "num_outputs"}. The exit code is 1 when any
// case failed (its message is printed and recorded), 2 on a usage or file error.
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "ndarray/autograd.h"
#include "ndarray/io.h"
#include "ndarray/ndarray.h"
#include "ndarray/runtime.h"

namespace weft {
namespace {

using nlohmann::json;

// Runs one case and writes its arrays; returns the number of visible outputs. Throws on error.
int run_case(const json& c) {
  const std::string op = c.at("op").get<std::string>();
  AttrMap attrs;
  if (c.contains("attrs")) {
    for (const auto& [key, value] : c.at("attrs").items()) attrs[key] = value.get<std::string>();
  }
  std::vector<NDArray> inputs;
  for (const auto& path : c.at("inputs")) inputs.push_back(load_npy_array(path.get<std::string>()));
  const bool is_train = c.value("is_train", false);
  const bool backward = c.value("backward", false);
  const std::string prefix = c.at("out_prefix").get<std::string>();
  std::vector<int> grad_inputs;
  if (c.contains("grad_inputs")) grad_inputs = c.at("grad_inputs").get<std::vector<int>>();

  std::vector<NDArray> outputs;
  if (backward) {
    for (int i : grad_inputs) {
      WEFT_CHECK(i >= 0 && i < static_cast<int>(inputs.size()))
          << "grad_inputs index " << i << " out of range";
      inputs[static_cast<size_t>(i)].attach_grad();
    }
    {
      autograd::RecordScope record(is_train);
      outputs = invoke(op, inputs, attrs);
    }
    std::vector<NDArray> head_grads;
    const auto& hg = c.at("head_grads");
    WEFT_CHECK(hg.size() == outputs.size())
        << op << ": " << hg.size() << " head gradients for " << outputs.size() << " outputs";
    for (const auto& path : hg) {
      const auto p = path.get<std::string>();
      head_grads.push_back(p.empty() ? NDArray() : load_npy_array(p));
    }
    autograd::backward(outputs, head_grads, /*retain_graph=*/false, /*train_mode=*/is_train);
  } else if (is_train) {
    autograd::TrainModeScope train;
    outputs = invoke(op, inputs, attrs);
  } else {
    autograd::PredictModeScope predict;
    outputs = invoke(op, inputs, attrs);
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    save_npy_array(prefix + "out" + std::to_string(i) + ".npy", outputs[i]);
  if (backward) {
    for (int i : grad_inputs) {
      save_npy_array(prefix + "grad" + std::to_string(i) + ".npy",
                     inputs[static_cast<size_t>(i)].grad());
    }
  }
  if (c.contains("dump_inputs")) {
    for (int i : c.at("dump_inputs").get<std::vector<int>>()) {
      WEFT_CHECK(i >= 0 && i < static_cast<int>(inputs.size()))
          << "dump_inputs index " << i << " out of range";
      save_npy_array(prefix + "in" + std::to_string(i) + ".npy", inputs[static_cast<size_t>(i)]);
    }
  }
  return static_cast<int>(outputs.size());
}

int main_impl(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: weft_op_driver CASES.json RESULTS.json\n";
    return 2;
  }
  json cases;
  try {
    std::ifstream in(argv[1]);
    if (!in) {
      std::cerr << "weft_op_driver: cannot open '" << argv[1] << "'\n";
      return 2;
    }
    cases = json::parse(in);
  } catch (const std::exception& e) {
    std::cerr << "weft_op_driver: '" << argv[1] << "': " << e.what() << "\n";
    return 2;
  }
  json results = json::array();
  bool any_failed = false;
  for (const auto& c : cases) {
    json r;
    r["id"] = c.value("id", std::string());
    try {
      r["num_outputs"] = run_case(c);
      waitall();
      r["ok"] = true;
    } catch (const std::exception& e) {
      // Errors raised inside kernels surface when waiting; drain the rest before going on.
      try {
        waitall();
      } catch (const std::exception&) {
      }
      r["ok"] = false;
      r["error"] = e.what();
      any_failed = true;
      std::cerr << "weft_op_driver: case '" << r["id"].get<std::string>() << "' ("
                << c.value("op", "?") << "): " << e.what() << "\n";
    }
    results.push_back(std::move(r));
  }
  std::ofstream out(argv[2]);
  out << results.dump(1) << "\n";
  if (!out) {
    std::cerr << "weft_op_driver: cannot write '" << argv[2] << "'\n";
    return 2;
  }
  return any_failed ? 1 : 0;
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  try {
    return weft::main_impl(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "weft_op_driver: " << e.what() << "\n";
    return 2;
  }
}
