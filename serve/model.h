// A served model: one folder of a model repository (`DIR/NAME/`) holding an MXNet
// `*-symbol.json`, optionally a `*.params` file, and `config.json` (inputs with a deferred batch
// dimension, batching limits). Loading checks everything a request would otherwise trip on: the
// graph parses, every weight is present with the right shape, and the model binds at batch 1.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/device.h"
#include "graph/graph.h"
#include "ndarray/ndarray.h"

namespace weft::serve {

/// One model input: its variable name and its shape with the batch dimension first (stored as -1).
struct InputSpec {
  std::string name;
  Shape shape;
};

/// `config.json` of a model folder.
struct ModelConfig {
  std::vector<InputSpec> inputs;  ///< required, at least one
  int64_t max_batch = 8;          ///< rows per executor run (and per request)
  double max_delay_ms = 2.0;      ///< how long the first request of a batch waits for others
  int64_t queue_capacity = 64;    ///< requests waiting; more are answered 503
  /// The batch sizes executors are bound for, ascending, the last one max_batch: a batch of n
  /// rows runs on the smallest size >= n, padded (TF Serving's allowed_batch_sizes). Default:
  /// the powers of two below max_batch, and max_batch.
  std::vector<int64_t> batch_sizes;
  /// Bind and run every batch size once before the version serves (a first run at a new shape
  /// pays for kernel selection and memory; this keeps that off requests, reloads included).
  bool warmup = true;
};

/// Parses config.json text; `what` names the file in errors (unknown keys are errors too).
ModelConfig parse_model_config(const std::string& text, const std::string& what);

/// A loaded, immutable model version. Weights are shared by every executor bound for it.
struct Model {
  std::string name;
  std::string dir;
  int version = 1;  ///< 1 + the number of reloads
  ModelConfig config;
  Device device = Device::cpu();
  std::shared_ptr<const graph::Graph> graph;
  std::map<std::string, NDArray, std::less<>> args;  ///< weights (no inputs, no labels)
  std::map<std::string, NDArray, std::less<>> aux;
  std::vector<std::string> output_names;
  /// Per output: its first dimension is the batch (checked by binding at batch 1 and 2). Requests
  /// are combined only when every output is batch-first; otherwise each request runs alone.
  bool batchable = true;
  /// The batch size a run of `rows` rows uses: the smallest of config.batch_sizes >= rows, or
  /// `rows` itself when the model is not batchable (its outputs are then returned whole).
  int64_t run_size(int64_t rows) const;
  /// The folder's files with sizes and modification times: a change means reload.
  std::string fingerprint;
  /// Where the weights came from ("FILE.params" or "seed S").
  std::string weights_source;
};

struct LoadOptions {
  Device device = Device::cpu();
  /// Seed of the weights drawn for a folder without `.params` (as `weft replay --seed`).
  uint64_t seed = 0;
};

/// Valid model names: letters, digits, '.', '_' and '-' (they appear in URLs and metric labels).
bool valid_model_name(const std::string& name);

/// The fingerprint of `dir` (see Model::fingerprint); empty when it cannot be read.
std::string folder_fingerprint(const std::string& dir);

/// Loads the model folder `dir` (named after its last component) as version `version`. Throws
/// weft::Error naming the file and problem.
std::shared_ptr<const Model> load_model(const std::string& dir, const LoadOptions& options,
                                        int version = 1);

}  // namespace weft::serve
