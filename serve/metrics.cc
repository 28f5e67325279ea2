// Serving metrics (see metrics.h).
#include "serve/metrics.h"

#include <cstdio>

namespace weft::serve {

namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Latency bounds in seconds (0.5 ms to 10 s) and batch-size bounds in rows.
std::vector<double> latency_bounds() {
  return {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10};
}
std::vector<double> batch_bounds() { return {1, 2, 4, 8, 16, 32, 64, 128, 256}; }

}  // namespace

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    out += name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum{" + labels + "} " + number(sum_) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
}

struct Metrics::PerModel {
  std::map<int, uint64_t> requests;  // by status code
  Histogram latency{latency_bounds()};
  Histogram queue{latency_bounds()};
  Histogram batch_rows{batch_bounds()};
  int64_t depth = 0;
  uint64_t loads_ok = 0, loads_error = 0;
};

Metrics::Metrics() = default;
Metrics::~Metrics() = default;

Metrics::PerModel& Metrics::at(const std::string& model) { return models_[model]; }

void Metrics::request(const std::string& model, int code, double seconds, bool inference) {
  std::lock_guard<std::mutex> lock(mu_);
  PerModel& m = at(model);
  ++m.requests[code];
  if (inference) m.latency.observe(seconds);
}

void Metrics::batch(const std::string& model, int64_t rows,
                    const std::vector<double>& queue_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  PerModel& m = at(model);
  m.batch_rows.observe(static_cast<double>(rows));
  for (double s : queue_seconds) m.queue.observe(s);
}

void Metrics::queue_depth(const std::string& model, int64_t depth) {
  std::lock_guard<std::mutex> lock(mu_);
  at(model).depth = depth;
}

void Metrics::model_load(const std::string& model, bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  ++(ok ? at(model).loads_ok : at(model).loads_error);
}

std::string Metrics::prometheus() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out += "# HELP weft_serve_requests_total HTTP requests answered, by model and status code.\n";
  out += "# TYPE weft_serve_requests_total counter\n";
  for (const auto& [name, m] : models_) {
    for (const auto& [code, n] : m.requests) {
      out += "weft_serve_requests_total{model=\"" + name + "\",code=\"" + std::to_string(code) +
             "\"} " + std::to_string(n) + "\n";
    }
  }
  auto histograms = [&](const char* metric, const char* help, Histogram PerModel::*h) {
    out += std::string("# HELP ") + metric + " " + help + "\n";
    out += std::string("# TYPE ") + metric + " histogram\n";
    for (const auto& [name, m] : models_) {
      if (name.empty()) continue;
      (m.*h).write(out, metric, "model=\"" + name + "\"");
    }
  };
  histograms("weft_serve_batch_size", "Rows per executor run.", &PerModel::batch_rows);
  histograms("weft_serve_queue_seconds", "Time a request waited for its batch.", &PerModel::queue);
  histograms("weft_serve_request_seconds", "Inference request latency, arrival to response.",
             &PerModel::latency);
  out += "# HELP weft_serve_queue_depth Requests waiting for a batch.\n";
  out += "# TYPE weft_serve_queue_depth gauge\n";
  for (const auto& [name, m] : models_) {
    if (!name.empty())
      out += "weft_serve_queue_depth{model=\"" + name + "\"} " + std::to_string(m.depth) + "\n";
  }
  out += "# HELP weft_serve_model_loads_total Model loads and reloads, by result.\n";
  out += "# TYPE weft_serve_model_loads_total counter\n";
  for (const auto& [name, m] : models_) {
    if (name.empty()) continue;
    out += "weft_serve_model_loads_total{model=\"" + name + "\",result=\"ok\"} " +
           std::to_string(m.loads_ok) + "\n";
    out += "weft_serve_model_loads_total{model=\"" + name + "\",result=\"error\"} " +
           std::to_string(m.loads_error) + "\n";
  }
  return out;
}

}  // namespace weft::serve
