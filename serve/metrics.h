// Serving metrics: counters, gauges and histograms per model, written as Prometheus text
// (exposition format 0.0.4) for GET /metrics. Thread-safe; updates take one mutex briefly.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace weft::serve {

/// A cumulative histogram over fixed upper bounds (Prometheus `le` buckets, +Inf implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double value);
  /// Appends the `_bucket`, `_sum` and `_count` lines of metric `name` with label text `labels`
  /// (`model="m"`, no braces).
  void write(std::string& out, const std::string& name, const std::string& labels) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  ///< per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  /// One finished HTTP request for `model` ("" for requests naming none) with its status code;
  /// `seconds` from arrival to response (recorded in the latency histogram for inference only).
  void request(const std::string& model, int code, double seconds, bool inference);
  /// One executor run of `rows` rows, gathered from requests that waited `queue_seconds` each.
  void batch(const std::string& model, int64_t rows, const std::vector<double>& queue_seconds);
  void queue_depth(const std::string& model, int64_t depth);
  /// A model load or reload ("ok" or "error").
  void model_load(const std::string& model, bool ok);
  /// Prometheus text of everything recorded.
  std::string prometheus() const;

 private:
  struct PerModel;
  PerModel& at(const std::string& model);  // requires mu_
  mutable std::mutex mu_;
  std::map<std::string, PerModel> models_;
};

}  // namespace weft::serve
