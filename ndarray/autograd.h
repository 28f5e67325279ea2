// Autograd for imperative code: record scopes, train/predict mode, the tape of recorded calls,
// and backward(), which runs each op's FGradient through an eager GradBuilder.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ndarray/ndarray.h"

namespace weft {

namespace autograd {
/// The backward of a recorded function (record_function): the gradients of its inputs from those
/// of its outputs. `out_grads` has one array per output (zeros where nothing flowed back); the
/// result has one array per input, a none array where an input gets no gradient.
using BackwardFunction = std::function<std::vector<NDArray>(const std::vector<NDArray>& out_grads)>;
}  // namespace autograd

namespace detail {
/// A recorded call (or a leaf). Inputs keep their own entries, so the tape is a DAG reachable from
/// any result; outputs are held without autograd entries (no cycles).
struct AutogradNode {
  std::shared_ptr<const OpAttrs> attrs;  ///< the op of a recorded call; null otherwise
  autograd::BackwardFunction function;   ///< a recorded function's backward (record_function)
  std::string function_name;             ///< for messages
  std::vector<NDArray> inputs;
  std::vector<NDArray> outputs;  ///< every output, hidden ones included
  bool is_train = false;
  bool freed = false;  ///< backward ran without retain_graph
  // Leaf state:
  GradReq grad_req = GradReq::kNull;
  NDArray grad;
  /// A recorded call or function (has a backward), not a leaf.
  bool is_call() const { return attrs != nullptr || static_cast<bool>(function); }
};
struct AutogradEntry {
  std::shared_ptr<AutogradNode> node;
  int index = 0;
};
/// Records a call when recording is on and an input requires grad. Called by invoke.
void maybe_record(const std::shared_ptr<const OpAttrs>& attrs, const std::vector<NDArray>& inputs,
                  std::vector<NDArray>& outputs);
}  // namespace detail

namespace autograd {

/// Whether calls on this thread are being recorded.
bool is_recording();
/// Whether ops on this thread run in training mode (Dropout masks, BatchNorm batch statistics).
bool is_training();
/// Sets the flags; return the previous values.
bool set_recording(bool recording);
bool set_training(bool training);

/// Records calls in this scope (and runs them in training mode unless train_mode is false).
/// Restores the previous state on exit. Call on one thread; scopes nest.
class RecordScope {
 public:
  explicit RecordScope(bool train_mode = true);
  ~RecordScope();
  RecordScope(const RecordScope&) = delete;
  RecordScope& operator=(const RecordScope&) = delete;

 private:
  bool prev_recording_, prev_training_;
};
/// Stops recording in this scope (optionally changing the mode).
class PauseScope {
 public:
  explicit PauseScope(bool train_mode = false);
  ~PauseScope();

 private:
  bool prev_recording_, prev_training_;
};
/// Training mode without recording.
class TrainModeScope {
 public:
  TrainModeScope();
  ~TrainModeScope();

 private:
  bool prev_;
};
/// Inference mode.
class PredictModeScope {
 public:
  PredictModeScope();
  ~PredictModeScope();

 private:
  bool prev_;
};

/// Records a computation that did not go through the operator registry (a bound executor, a
/// user-defined function) as one node of the tape, with `backward` as its gradient: the outputs
/// get autograd entries, as an op's results would. Records only when recording is on and an input
/// requires a gradient; returns whether it did. `backward` runs on the thread that calls
/// backward(), in prediction-or-training mode as backward() was asked, with recording off; it may
/// invoke ops and return arrays still being computed.
bool record_function(std::string name, const std::vector<NDArray>& inputs,
                     std::vector<NDArray>& outputs, BackwardFunction backward);

/// Computes gradients of `heads` with respect to every leaf (attach_grad) they depend on and
/// writes them into the leaves' grad buffers per grad_req. `head_grads` (one per head; a none
/// array means ones) seed the heads. Unless `retain_graph`, the recorded graph is freed and a
/// second backward through it throws. Backward ops run in training mode unless `train_mode` is
/// false. Returns at once: the gradient computations are pushed onto the engine.
/// Throws ValueError when no head requires grad, or when an op on the path has no FGradient.
void backward(const std::vector<NDArray>& heads, const std::vector<NDArray>& head_grads = {},
              bool retain_graph = false, bool train_mode = true);

/// Gradients of `heads` with respect to `variables` (which need not be leaves with attach_grad),
/// returned instead of written to grad buffers.
std::vector<NDArray> grad(const std::vector<NDArray>& heads, const std::vector<NDArray>& variables,
                          const std::vector<NDArray>& head_grads = {}, bool retain_graph = false,
                          bool train_mode = true);

}  // namespace autograd
}  // namespace weft
