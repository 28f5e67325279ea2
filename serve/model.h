// A served model: one folder of a model repository (`DIR/NAME/`) holding an MXNet
// `*-symbol.json`, optionally a `*.params` file, and `config.json` (inputs with a deferred batch
// dimension, batching limits). Loading checks everything a request would otherwise trip on: the
// graph parses, every weight is present with the right shape, and the model binds at batch 1.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
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
  /// Executors kept for row counts outside batch_sizes (a model whose outputs are not
  /// batch-first runs each request at its own row count), least recently used dropped first
  /// (Note [Bounded executor set] in serve/batcher.cc). config.json `extra_executors`, 1 to 1024.
  int64_t extra_executors = 8;
  /// config.json `seed`: draw the weights of a folder without `.params` from this seed (as
  /// `weft replay --seed`). Takes precedence over LoadOptions::seed, and is the only way a folder
  /// that lost its `.params` may switch to drawn weights (Note [Drawn weights are asked for]).
  std::optional<uint64_t> seed;
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
  /// Every output's first dimension is the batch at every size of config.batch_sizes (checked by
  /// shape inference at each). Requests are combined only then; otherwise each request runs
  /// alone. The batcher checks again on every run (Note [Batch-first outputs] in batcher.cc).
  bool batchable = true;
  /// The batch size a run of `rows` rows uses: the smallest of config.batch_sizes >= rows, or
  /// `rows` itself when the model is not batchable (its outputs are then returned whole).
  int64_t run_size(int64_t rows) const;
  /// The folder's files with sizes and modification times: a change means reload.
  std::string fingerprint;
  /// Where the weights came from ("FILE.params", "seed S", or "none" for a graph without any).
  std::string weights_source;
  /// The weights came from a `.params` file of the folder.
  bool from_params = false;
};

// Note [Drawn weights are asked for]
// A folder without `.params` used to be served with weights drawn from the seed (default 0),
// silently. During a deploy that removes NAME-0000.params before copying the new one, a reload
// then served a version answering 200 with values neither file gives. Now drawn weights are
// loaded only when asked for: `"seed": N` in config.json or `weft serve --seed N`
// (LoadOptions::seed); otherwise a folder whose graph has weights and no `.params` fails to load
// with a message saying how to ask. A version that replaces one loaded from a `.params` must
// have a `.params` too, unless its own config.json asks for a seed (the server-wide --seed is
// not enough): the deploy's window is a failed load, and the previous version keeps serving.
// A graph without weights (a reduction, a reshape) needs neither.

/// How load_model loads a folder.
struct LoadOptions {
  Device device = Device::cpu();
  /// Seed of the weights drawn for a folder without `.params` (as `weft replay --seed`); unset:
  /// such a folder must ask in its config.json (Note [Drawn weights are asked for]).
  std::optional<uint64_t> seed;
  /// The `.params` file name the version being replaced loaded its weights from, empty when
  /// none: set, a folder without `.params` fails to load unless its config.json has `seed`.
  std::string previous_params;
};

/// Valid model names: letters, digits, '.', '_' and '-' (they appear in URLs and metric labels).
bool valid_model_name(const std::string& name);

/// The fingerprint of `dir` (see Model::fingerprint); empty when it cannot be read.
std::string folder_fingerprint(const std::string& dir);

/// Loads the model folder `dir` (named after its last component) as version `version`. Throws
/// weft::Error naming the file and problem. Thread-safe (it reads files and binds executors).
std::shared_ptr<const Model> load_model(const std::string& dir, const LoadOptions& options,
                                        int version = 1);

}  // namespace weft::serve
