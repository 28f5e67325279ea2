// Dynamic batching (see batcher.h).
#include "serve/batcher.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/error.h"
#include "graph/executor.h"
#include "serve/client_message.h"
#include "serve/metrics.h"

namespace weft::serve {

using Clock = std::chrono::steady_clock;

namespace {

// Note [One answer per request]
// `done` renders the reply into a response; it may throw (out of memory, or a JSON writer meeting
// bytes that are not UTF-8). The request must still get exactly one answer, and the batcher's
// thread must not end. The fallback used to be a 500 carrying the exception's message, built
// after the throw: a message holding the same bad bytes made the renderer throw again, that
// second exception was swallowed, and the client waited forever. Now the fallback reply is made
// before the first call, with the fixed ASCII message kAnswerFailed (nothing from the failure
// goes into it, and nothing is allocated on the error path); the first error goes to the log.
// Only a callback that throws even on that leaves the request unanswered, and that is logged.
void answer(InferRequest& request, InferReply&& reply) noexcept {
  InferReply failed;
  failed.status = 500;
  failed.model = reply.model;
  failed.queue_seconds = reply.queue_seconds;
  try {
    failed.error = kAnswerFailed;
  } catch (...) {  // out of memory: an empty message still answers
  }
  const char* name = reply.model ? reply.model->name.c_str() : "?";
  try {
    request.done(std::move(reply));
    return;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "weft serve: model '%s': the answer could not be written: %s\n", name,
                 e.what());
  } catch (...) {
    std::fprintf(stderr, "weft serve: model '%s': the answer could not be written\n", name);
  }
  try {
    request.done(std::move(failed));
  } catch (...) {
    std::fprintf(stderr,
                 "weft serve: model '%s': the error answer could not be written either; the "
                 "request has no answer\n",
                 name);
  }
}

// Copies the rows of `requests`, in order, into the inputs of `exec` (bound for `size` rows, at
// least theirs; padding rows are zeros), runs it and returns its outputs on the host.
std::vector<HostTensor> execute(graph::Executor& exec, const Model& model,
                                const std::vector<InferRequest*>& requests, int64_t size) {
  int64_t rows = 0;
  for (const InferRequest* r : requests) rows += r->rows();
  WEFT_ICHECK(rows <= size) << rows << " rows on an executor bound for " << size;
  for (size_t k = 0; k < model.config.inputs.size(); ++k) {
    NDArray dst = exec.arg(model.config.inputs[k].name);
    const size_t row_floats = static_cast<size_t>(dst.size() / size);
    std::vector<float> staging;
    float* out = nullptr;
    const bool host = dst.device().type == DeviceType::kCPU;
    if (host) {
      dst.wait_to_write();
      out = static_cast<float*>(dst.raw_data());
    } else {
      staging.resize(static_cast<size_t>(dst.size()));
      out = staging.data();
    }
    for (const InferRequest* r : requests) {
      const HostTensor& t = r->inputs[k];
      std::memcpy(out, t.data.data(), t.data.size() * sizeof(float));
      out += static_cast<size_t>(t.rows()) * row_floats;
    }
    std::fill(out, out + static_cast<size_t>(size - rows) * row_floats, 0.0f);
    if (!host) NDArray::from_host(staging.data(), dst.shape(), DType::kFloat32).copy_to(dst);
  }
  exec.forward(false);
  std::vector<HostTensor> outputs;
  for (const NDArray& o : exec.outputs()) {
    HostTensor t;
    t.shape = o.shape();
    if (o.dtype() == DType::kFloat32) {
      t.data = o.to_vector<float>();
    } else {
      const std::vector<double> d = o.to_doubles();
      t.data.assign(d.begin(), d.end());
    }
    outputs.push_back(std::move(t));
  }
  return outputs;
}

}  // namespace

std::vector<HostTensor> validate_inputs(const Model& model,
                                        std::vector<std::pair<std::string, HostTensor>> named) {
  const auto& specs = model.config.inputs;
  for (const auto& [name, t] : named) {
    const bool known =
        std::any_of(specs.begin(), specs.end(), [&](const InputSpec& s) { return s.name == name; });
    if (!known) {
      std::string list;
      for (const InputSpec& s : specs) list += (list.empty() ? "'" : ", '") + s.name + "'";
      WEFT_THROW(ValueError) << "model '" << model.name << "' has no input '" << name
                             << "' (inputs: " << list << ")";
    }
  }
  std::vector<HostTensor> ordered;
  int64_t rows = -1;
  for (const InputSpec& spec : specs) {
    auto it = std::find_if(named.begin(), named.end(),
                           [&](const auto& p) { return p.first == spec.name; });
    WEFT_CHECK(it != named.end()) << "input '" << spec.name << "' is missing";
    WEFT_CHECK(std::count_if(named.begin(), named.end(),
                             [&](const auto& p) { return p.first == spec.name; }) == 1)
        << "input '" << spec.name << "' is given twice";
    HostTensor& t = it->second;
    bool ok = t.shape.ndim() == spec.shape.ndim();
    for (int d = 1; ok && d < spec.shape.ndim(); ++d) ok = t.shape[d] == spec.shape[d];
    WEFT_CHECK(ok) << "input '" << spec.name << "' has shape " << t.shape.to_string()
                   << ", expected " << spec.shape.to_string() << " (-1: the batch, 1 to "
                   << model.config.max_batch << " rows)";
    WEFT_CHECK(t.rows() >= 1 && t.rows() <= model.config.max_batch)
        << "input '" << spec.name << "' has " << t.rows() << " rows; model '" << model.name
        << "' takes 1 to " << model.config.max_batch << " per request";
    WEFT_CHECK(rows < 0 || rows == t.rows())
        << "input '" << spec.name << "' has " << t.rows() << " rows, the other inputs " << rows;
    rows = t.rows();
    ordered.push_back(std::move(t));
  }
  return ordered;
}

// Note [Bounded executor set]
// Each executor holds its own arena (a memory plan for its batch size). A model whose outputs are
// not batch-first runs every request at its own row count, so it used to bind one executor per
// distinct row count and keep them all: memory grew with every new count (60 counts: 171 to
// 326 MB). The executors of config.batch_sizes are kept (they are the ones a batchable model
// uses, bound and warmed up at load); any other size is one of at most config.extra_executors
// (default 8), and binding one more drops the least recently used of them first. A dropped size
// is bound again when a request needs it. One batcher thread uses the set, so at() needs no
// lock; its reference is used only until the next at().

ExecutorSet::ExecutorSet(std::shared_ptr<const Model> model)
    : model_(std::move(model)), batchable_(model_->batchable) {
  if (!batchable_) return;  // exact sizes, bound when a request needs one
  for (int64_t size : model_->config.batch_sizes) {
    graph::Executor& exec = at(size);
    if (!model_->config.warmup) continue;
    exec.forward(false);  // the inputs are zeros
    for (const NDArray& out : exec.outputs()) out.wait_to_read();
  }
}

ExecutorSet::~ExecutorSet() = default;

int64_t ExecutorSet::run_size(int64_t rows) const {
  return batchable_ ? model_->run_size(rows) : rows;
}

size_t ExecutorSet::capacity() const {
  return model_->config.batch_sizes.size() + static_cast<size_t>(model_->config.extra_executors);
}

graph::Executor& ExecutorSet::at(int64_t size) {
  ++uses_;
  for (Slot& slot : executors_) {
    if (slot.size != size) continue;
    slot.last_use = uses_;
    return *slot.exec;
  }
  const auto& sizes = model_->config.batch_sizes;
  const bool kept = std::find(sizes.begin(), sizes.end(), size) != sizes.end();
  if (!kept) {  // Note [Bounded executor set]
    auto extras = std::count_if(executors_.begin(), executors_.end(),
                                [](const Slot& slot) { return !slot.kept; });
    for (; extras >= model_->config.extra_executors; --extras) {
      auto oldest = executors_.end();
      for (auto it = executors_.begin(); it != executors_.end(); ++it) {
        if (!it->kept && (oldest == executors_.end() || it->last_use < oldest->last_use)) {
          oldest = it;
        }
      }
      executors_.erase(oldest);
    }
  }
  graph::BindOptions bo;
  bo.device = model_->device;
  for (const InputSpec& in : model_->config.inputs) bo.inputs.shapes[in.name] = in.shape;
  bo.inputs.batch = size;
  executors_.push_back(
      {size, graph::Executor::bind(model_->graph, bo, model_->args, model_->aux), uses_, kept});
  bound_.store(executors_.size(), std::memory_order_relaxed);
  return *executors_.back().exec;
}

Batcher::Batcher(std::shared_ptr<const Model> model, bool batching, Metrics* metrics)
    : batching_(batching),
      metrics_(metrics),
      executors_(std::make_shared<ExecutorSet>(std::move(model))) {
  thread_ = std::thread([this] { loop(); });
}

Batcher::~Batcher() { stop(); }

std::shared_ptr<const Model> Batcher::model() const {
  std::lock_guard<std::mutex> lock(mu_);
  return executors_->model();
}

void Batcher::set_model(std::shared_ptr<const Model> model) {
  auto executors = std::make_shared<ExecutorSet>(std::move(model));
  std::lock_guard<std::mutex> lock(mu_);
  executors_ = std::move(executors);
}

Admit Batcher::submit(InferRequest&& request) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Admit::kStopped;
  const Model& model = *executors_->model();
  if (static_cast<int64_t>(queue_.size()) >= model.config.queue_capacity) return Admit::kQueueFull;
  queue_.push_back(std::move(request));
  if (metrics_) metrics_->queue_depth(model.name, static_cast<int64_t>(queue_.size()));
  cv_.notify_one();
  return Admit::kQueued;
}

void Batcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

int64_t Batcher::depth() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(queue_.size());
}

size_t Batcher::executors_bound() const {
  std::lock_guard<std::mutex> lock(mu_);
  return executors_->bound();
}

void Batcher::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, nothing left
    std::shared_ptr<ExecutorSet> executors = executors_;
    const std::shared_ptr<const Model>& model = executors->model();
    const bool combine = batching_ && executors->batchable();
    const int64_t max_rows = model->config.max_batch;
    // Wait for more requests until the batch is full or the first request's delay ran out.
    const auto deadline =
        queue_.front().arrival +
        std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double, std::milli>(model->config.max_delay_ms));
    // Full: the queued requests reach max_rows, or the next one would not fit.
    auto full = [&] {
      int64_t rows = 0;
      for (const InferRequest& r : queue_) {
        if (rows + r.rows() > max_rows) return true;
        rows += r.rows();
      }
      return rows >= max_rows;
    };
    if (combine) cv_.wait_until(lock, deadline, [&] { return stopping_ || full(); });
    // Rows to take: what fits in max_batch, cut down to the largest allowed batch size it
    // reaches, so that single-row requests never run padded (5 queued rows with sizes 1, 2, 4, 8
    // run as 4 now and 1 next, not as 8 with 3 rows of zeros: on a CPU every row costs the
    // same). Requests of several rows may still leave a remainder, which is padded.
    int64_t limit = max_rows;
    if (combine) {
      int64_t fits = 0;
      for (const InferRequest& r : queue_) {
        if (fits + r.rows() > max_rows) break;
        fits += r.rows();
      }
      for (int64_t size : model->config.batch_sizes) {
        if (size <= fits) limit = size;
      }
    }
    std::vector<InferRequest> batch;
    int64_t rows = 0;
    while (!queue_.empty() &&
           (batch.empty() || (combine && rows + queue_.front().rows() <= limit))) {
      rows += queue_.front().rows();
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    if (metrics_) metrics_->queue_depth(model->name, static_cast<int64_t>(queue_.size()));
    lock.unlock();
    run(batch, *executors);
    executors.reset();  // a replaced version is freed here, off the lock
    lock.lock();
  }
}

// Note [Batch-first outputs]
// Combining requests is right only when every output has the run's batch as its first dimension:
// the outputs are split back by rows. Loading checks this by shape inference at every size of
// config.batch_sizes (it used to bind at 1 and 2 only, and a graph keeping min(batch, 2) rows
// passed; four one-row requests then got rows 3 and 4 read past the end of the output). The
// run checks again before splitting, every time: an output without `size` rows switches the
// version to running requests alone (ExecutorSet::run_alone(), logged once), and the requests of
// that batch run again, each alone, so none is answered from rows that are not its own.

void Batcher::run(std::vector<InferRequest>& batch, ExecutorSet& executors) {
  const std::shared_ptr<const Model>& model = executors.model();
  const auto start = Clock::now();
  std::vector<double> waits;
  for (const InferRequest& r : batch) {
    waits.push_back(std::chrono::duration<double>(start - r.arrival).count());
  }
  auto fail_all = [&](int status, const std::string& message) {
    for (size_t i = 0; i < batch.size(); ++i) {
      InferReply reply;
      reply.status = status;
      reply.error = message;
      reply.model = model;
      reply.queue_seconds = waits[i];
      answer(batch[i], std::move(reply));
    }
  };
  // A reload between validation and now may have changed the inputs' shapes.
  std::vector<InferRequest> fitting;
  std::vector<double> fitting_waits;
  for (size_t i = 0; i < batch.size(); ++i) {
    bool ok = batch[i].inputs.size() == model->config.inputs.size();
    for (size_t k = 0; ok && k < batch[i].inputs.size(); ++k) {
      const Shape& want = model->config.inputs[k].shape;
      const Shape& got = batch[i].inputs[k].shape;
      ok = got.ndim() == want.ndim();
      for (int d = 1; ok && d < want.ndim(); ++d) ok = got[d] == want[d];
    }
    if (ok) {
      fitting.push_back(std::move(batch[i]));
      fitting_waits.push_back(waits[i]);
      continue;
    }
    InferReply reply;
    reply.status = 400;
    reply.error = "model '" + model->name + "' was reloaded (version " +
                  std::to_string(model->version) +
                  ") with other input shapes; send the request again";
    reply.model = model;
    answer(batch[i], std::move(reply));
  }
  batch = std::move(fitting);
  waits = std::move(fitting_waits);
  if (batch.empty()) return;
  int64_t rows = 0;
  for (const InferRequest& r : batch) rows += r.rows();
  if (metrics_) metrics_->batch(model->name, rows, waits);

  // The executor of the smallest batch size that holds the rows; padding rows are zeros.
  const int64_t size = executors.run_size(rows);
  std::vector<HostTensor> outputs;
  std::vector<InferRequest*> all;
  for (InferRequest& r : batch) all.push_back(&r);
  try {
    outputs = execute(executors.at(size), *model, all, size);
  } catch (const std::exception& e) {
    fail_all(500, "model '" + model->name + "' failed to run: " + client_message(e));
    return;
  }
  // A batch of one request at its own row count gets the outputs whole (also what a model that
  // is not batchable gives); anything else is split by rows, which needs every output to hold
  // exactly `size` rows (Note [Batch-first outputs]).
  const bool whole = batch.size() == 1 && size == rows;
  for (size_t h = 0; !whole && h < outputs.size(); ++h) {
    const Shape& shape = outputs[h].shape;
    if (shape.ndim() >= 1 && shape[0] == size) continue;
    executors.run_alone();
    const std::string output = h < model->output_names.size() ? model->output_names[h] : "?";
    std::fprintf(stderr,
                 "weft serve: model '%s' version %d: output '%s' has shape %s in a run of %lld "
                 "rows: its outputs are not batch-first; requests run alone from now on\n",
                 model->name.c_str(), model->version, output.c_str(), shape.to_string().c_str(),
                 static_cast<long long>(size));
    for (size_t i = 0; i < batch.size(); ++i) {
      InferReply reply;
      reply.model = model;
      reply.queue_seconds = waits[i];
      try {
        const int64_t n = batch[i].rows();
        reply.outputs = execute(executors.at(n), *model, {&batch[i]}, n);
      } catch (const std::exception& e) {
        reply.status = 500;
        reply.error = "model '" + model->name + "' failed to run: " + client_message(e);
      }
      answer(batch[i], std::move(reply));
    }
    return;
  }
  // Split the outputs back, row for row (a batch of one request gets them whole).
  int64_t row = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    InferReply reply;
    reply.model = model;
    reply.queue_seconds = waits[i];
    const int64_t n = batch[i].rows();
    for (const HostTensor& o : outputs) {
      if (whole) {
        reply.outputs.push_back(o);
        continue;
      }
      HostTensor part;
      std::vector<int64_t> dims(o.shape.begin(), o.shape.end());
      const size_t row_floats = static_cast<size_t>(o.shape.size() / o.shape[0]);
      dims[0] = n;
      part.shape = Shape(dims);
      part.data.assign(o.data.begin() + static_cast<ptrdiff_t>(row * row_floats),
                       o.data.begin() + static_cast<ptrdiff_t>((row + n) * row_floats));
      reply.outputs.push_back(std::move(part));
    }
    row += n;
    answer(batch[i], std::move(reply));
  }
}

}  // namespace weft::serve
