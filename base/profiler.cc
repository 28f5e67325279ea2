// Profiler: per-thread event buffers and the Chrome trace JSON writer.
#include "base/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <unordered_map>

#include "base/error.h"

namespace weft {

struct CounterSample {
  std::string track;
  int64_t ts_ns;
  double value;
};

struct FlowRecord {
  uint64_t from_id;
  uint64_t to_id;
};

struct Profiler::Buffer {
  std::mutex mutex;  // taken by the owning thread to append and by readers; never contended hot
  int lane = -1;
  int64_t quota = 0;    // events this buffer may still record (Note [Profiler event budget])
  int64_t dropped = 0;  // events refused since clear()
  std::vector<OpTraceRecord> ops;
  std::vector<FlowRecord> flows;
  std::vector<CounterSample> counters;
};

namespace {
const auto kEpoch = std::chrono::steady_clock::now();

void append_escaped(std::string& out, std::string_view text) {
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
}

void append_us(std::string& out, int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(ns) / 1000.0);
  out += buf;
}
}  // namespace

Profiler::Profiler() = default;

Profiler& Profiler::global() {
  // Leaked on purpose: worker threads of engines destroyed during static destruction may still
  // record, and must not find the profiler gone.
  static Profiler* profiler = new Profiler();
  return *profiler;
}

int64_t Profiler::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                              kEpoch)
      .count();
}

void Profiler::start() { enabled_.store(true, std::memory_order_relaxed); }
void Profiler::stop() { enabled_.store(false, std::memory_order_relaxed); }

// Note [Profiler event budget]
// The bound is global, but a shared counter bumped per event would be a cache line every
// recording thread writes. Each buffer instead takes a quota of events from `reserved_` in
// chunks (at most 1024, fewer for small bounds) and spends it under its own lock. The quotas
// handed out never sum past max_events_, so the bound holds exactly; a quota a thread does not
// use is lost until clear(), so with many threads the profiler may start dropping a little before
// the bound. clear() resets `reserved_` first and then every quota, so a reservation racing with
// it can only be lost, never counted twice.
bool Profiler::admit(Buffer& buffer) {
  if (buffer.quota == 0) {
    const int64_t limit = max_events_.load(std::memory_order_relaxed);
    // relaxed: the budget is a count; it orders nothing.
    if (reserved_.load(std::memory_order_relaxed) < limit) {
      const int64_t chunk = std::clamp<int64_t>(limit / 64, 1, 1024);
      const int64_t before = reserved_.fetch_add(chunk, std::memory_order_relaxed);
      if (before < limit) buffer.quota = std::min(chunk, limit - before);
    }
  }
  if (buffer.quota == 0) {
    ++buffer.dropped;
    return false;
  }
  --buffer.quota;
  return true;
}

void Profiler::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  reserved_.store(0, std::memory_order_relaxed);  // first: Note [Profiler event budget]
  for (auto& buffer : buffers_) {
    std::lock_guard<std::mutex> buffer_lock(buffer->mutex);
    buffer->ops.clear();
    buffer->flows.clear();
    buffer->counters.clear();
    buffer->ops.shrink_to_fit();
    buffer->flows.shrink_to_fit();
    buffer->counters.shrink_to_fit();
    buffer->quota = 0;
    buffer->dropped = 0;
  }
}

void Profiler::set_max_events(int64_t max_events) {
  max_events_.store(std::max<int64_t>(max_events, 1), std::memory_order_relaxed);
}

int64_t Profiler::dropped_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t dropped = 0;
  for (const auto& buffer : buffers_) {
    std::lock_guard<std::mutex> buffer_lock(buffer->mutex);
    dropped += buffer->dropped;
  }
  return dropped;
}

size_t Profiler::event_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t count = 0;
  for (const auto& buffer : buffers_) {
    std::lock_guard<std::mutex> buffer_lock(buffer->mutex);
    count += buffer->ops.size() + buffer->flows.size() + buffer->counters.size();
  }
  return count;
}

Profiler::Buffer& Profiler::local_buffer() {
  // One buffer per thread, shared with the profiler so it outlives the thread.
  thread_local std::shared_ptr<Buffer> buffer;
  if (!buffer) {
    buffer = std::make_shared<Buffer>();
    std::lock_guard<std::mutex> lock(mutex_);
    buffers_.push_back(buffer);
  }
  return *buffer;
}

int Profiler::set_thread_lane(std::string name) {
  Buffer& buffer = local_buffer();
  std::lock_guard<std::mutex> lock(mutex_);
  if (buffer.lane < 0) {
    buffer.lane = static_cast<int>(lane_names_.size());
    lane_names_.push_back(std::move(name));
  } else {
    lane_names_[buffer.lane] = std::move(name);
  }
  return buffer.lane;
}

int Profiler::thread_lane() {
  Buffer& buffer = local_buffer();
  // Only this thread writes its buffer's lane, so it may read it without the lock.
  if (buffer.lane >= 0) return buffer.lane;
  std::lock_guard<std::mutex> lock(mutex_);
  if (buffer.lane < 0) {
    buffer.lane = static_cast<int>(lane_names_.size());
    lane_names_.push_back("thread " + std::to_string(buffer.lane));
  }
  return buffer.lane;
}

void Profiler::record_op(OpTraceRecord record) {
  Buffer& buffer = local_buffer();
  std::lock_guard<std::mutex> lock(buffer.mutex);
  if (admit(buffer)) buffer.ops.push_back(std::move(record));
}

void Profiler::record_flow(uint64_t from_id, uint64_t to_id) {
  Buffer& buffer = local_buffer();
  std::lock_guard<std::mutex> lock(buffer.mutex);
  if (admit(buffer)) buffer.flows.push_back({from_id, to_id});
}

void Profiler::record_counter(std::string_view track, double value) {
  Buffer& buffer = local_buffer();
  int64_t now = now_ns();
  std::lock_guard<std::mutex> lock(buffer.mutex);
  if (admit(buffer)) buffer.counters.push_back({std::string(track), now, value});
}

size_t Profiler::op_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t count = 0;
  for (const auto& buffer : buffers_) {
    std::lock_guard<std::mutex> buffer_lock(buffer->mutex);
    count += buffer->ops.size();
  }
  return count;
}

std::string Profiler::chrome_trace_json() const {
  std::vector<OpTraceRecord> ops;
  std::vector<FlowRecord> flows;
  std::vector<CounterSample> counters;
  std::vector<std::string> lanes;
  int64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lanes = lane_names_;
    for (const auto& buffer : buffers_) {
      std::lock_guard<std::mutex> buffer_lock(buffer->mutex);
      dropped += buffer->dropped;
      ops.insert(ops.end(), buffer->ops.begin(), buffer->ops.end());
      flows.insert(flows.end(), buffer->flows.begin(), buffer->flows.end());
      counters.insert(counters.end(), buffer->counters.begin(), buffer->counters.end());
    }
  }
  std::unordered_map<uint64_t, size_t> op_index;
  op_index.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) op_index.emplace(ops[i].id, i);

  std::string out;
  out.reserve(256 + ops.size() * 220 + flows.size() * 160);
  // "otherData" is the trace's metadata: how many events the bound dropped (Perfetto shows it
  // with the trace's info).
  out += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"dropped_events\":";
  out += std::to_string(dropped);
  out += ",\"max_events\":";
  out += std::to_string(max_events());
  out += "},\"traceEvents\":[\n";
  out +=
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"weft\"}}";
  for (size_t lane = 0; lane < lanes.size(); ++lane) {
    out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":";
    out += std::to_string(lane);
    out += ",\"args\":{\"name\":\"";
    append_escaped(out, lanes[lane]);
    out += "\"}}";
    out += ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":";
    out += std::to_string(lane);
    out += ",\"args\":{\"sort_index\":";
    out += std::to_string(lane);
    out += "}}";
  }
  for (const auto& op : ops) {
    out += ",\n{\"name\":\"";
    append_escaped(out, op.name);
    out += "\",\"cat\":\"op\",\"ph\":\"X\",\"pid\":1,\"tid\":";
    out += std::to_string(op.lane);
    out += ",\"ts\":";
    append_us(out, op.start_ns);
    out += ",\"dur\":";
    append_us(out, op.end_ns - op.start_ns);
    out += ",\"args\":{\"id\":";
    out += std::to_string(op.id);
    out += ",\"device\":\"";
    append_escaped(out, op.device);
    out += "\",\"queued_us\":";
    append_us(out, op.queued_ns);
    out += ",\"ready_us\":";
    append_us(out, op.ready_ns);
    out += ",\"wait_us\":";
    append_us(out, op.start_ns - op.queued_ns);
    if (op.skipped) out += ",\"skipped\":true";
    if (op.failed) out += ",\"failed\":true";
    out += "}}";
  }
  uint64_t flow_id = 0;
  for (const auto& flow : flows) {
    auto from = op_index.find(flow.from_id);
    auto to = op_index.find(flow.to_id);
    if (from == op_index.end() || to == op_index.end()) continue;
    const OpTraceRecord& a = ops[from->second];
    const OpTraceRecord& b = ops[to->second];
    ++flow_id;
    // The start binds to the releasing slice (its own start lies inside it); the finish binds to
    // the enclosing slice of the released op ("bp":"e").
    out += ",\n{\"name\":\"release\",\"cat\":\"dependency\",\"ph\":\"s\",\"id\":";
    out += std::to_string(flow_id);
    out += ",\"pid\":1,\"tid\":";
    out += std::to_string(a.lane);
    out += ",\"ts\":";
    append_us(out, a.start_ns);
    out += "}";
    out += ",\n{\"name\":\"release\",\"cat\":\"dependency\",\"ph\":\"f\",\"bp\":\"e\",\"id\":";
    out += std::to_string(flow_id);
    out += ",\"pid\":1,\"tid\":";
    out += std::to_string(b.lane);
    out += ",\"ts\":";
    append_us(out, b.start_ns);
    out += "}";
  }
  for (const auto& counter : counters) {
    out += ",\n{\"name\":\"";
    append_escaped(out, counter.track);
    out += "\",\"ph\":\"C\",\"pid\":1,\"ts\":";
    append_us(out, counter.ts_ns);
    char buf[48];
    std::snprintf(buf, sizeof(buf), "%.17g", counter.value);
    out += ",\"args\":{\"value\":";
    out += buf;
    out += "}}";
  }
  out += "\n]}\n";
  return out;
}

void Profiler::write_chrome_trace(const std::string& path) const {
  std::string json = chrome_trace_json();
  if (int64_t dropped = dropped_events(); dropped > 0) {
    std::fprintf(stderr,
                 "weft: profiler: the trace '%s' lacks %lld event(s) recorded past its bound of "
                 "%lld events (EngineConfig::profile_max_events, WEFT_PROFILE_MAX_EVENTS)\n",
                 path.c_str(), static_cast<long long>(dropped),
                 static_cast<long long>(max_events()));
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  WEFT_CHECK(file.good()) << "profiler: cannot open trace file '" << path << "' for writing";
  file.write(json.data(), static_cast<std::streamsize>(json.size()));
  file.close();
  WEFT_CHECK(!file.fail()) << "profiler: failed writing trace file '" << path << "'";
}

}  // namespace weft
