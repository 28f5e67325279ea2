// Test helper: parses a Chrome trace (as Profiler writes it) and lists what makes it invalid.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace weft::testing {

/// One "X" slice of a trace. Times in microseconds, as in the file.
struct TraceSlice {
  std::string name;
  int64_t tid = -1;
  double ts = 0;
  double dur = 0;
  nlohmann::json args;
  double end() const { return ts + dur; }
};

/// One flow arrow: its "s" and "f" events.
struct TraceFlow {
  int64_t s_tid = -1, f_tid = -1;
  double s_ts = 0, f_ts = 0;
  int starts = 0, finishes = 0;
  std::string f_binding;  // the "bp" of the "f" event
};

/// One "C" counter sample.
struct TraceCounter {
  std::string name;
  double ts = 0;
  double value = 0;
};

/// A trace taken apart, and the problems found while doing so.
struct ParsedTrace {
  std::map<int64_t, std::string> lane_names;  // tid -> thread_name
  std::vector<TraceSlice> slices;
  std::map<std::string, TraceFlow> flows;  // by id (as text)
  std::vector<TraceCounter> counters;
  std::vector<std::string> problems;

  /// Slices named `name`.
  std::vector<const TraceSlice*> slices_named(const std::string& name) const {
    std::vector<const TraceSlice*> found;
    for (const auto& s : slices) {
      if (s.name == name) found.push_back(&s);
    }
    return found;
  }

  /// The problems as one message ("" when valid).
  std::string problem_text() const {
    std::string text;
    for (const auto& p : problems) text += p + "\n";
    return text;
  }
};

/// Timestamps are printed with 1 ns resolution; sums of two rounded values may be off by this.
inline constexpr double kTraceTimeSlackUs = 0.002;

/// Parses `json_text` and checks the structure weft's traces promise: a top-level object with a
/// "traceEvents" array; "M" thread_name metadata for every tid that events use; "X" slices with
/// name, ts, dur >= 0, tid and args.device; flows as "s"/"f" pairs sharing an id, the "f" bound
/// with "bp":"e", each end inside an "X" slice of its own tid; "C" counters with args.value.
inline ParsedTrace parse_chrome_trace(const std::string& json_text) {
  ParsedTrace trace;
  auto problem = [&](std::string text) { trace.problems.push_back(std::move(text)); };
  nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    problem("not valid JSON");
    return trace;
  }
  if (!doc.is_object()) {
    problem("top level is not an object");
    return trace;
  }
  if (!doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    problem("no \"traceEvents\" array");
    return trace;
  }
  std::set<int64_t> used_tids;
  for (const auto& event : doc["traceEvents"]) {
    if (!event.is_object() || !event.contains("ph") || !event["ph"].is_string()) {
      problem("event without a \"ph\" string: " + event.dump());
      continue;
    }
    const std::string ph = event["ph"];
    auto number = [&](const char* key) -> bool {
      if (event.contains(key) && event[key].is_number()) return true;
      problem(ph + " event without numeric \"" + key + "\": " + event.dump());
      return false;
    };
    if (ph == "M") {
      if (event.value("name", "") == "thread_name") {
        if (!number("tid")) continue;
        if (!event.contains("args") || !event["args"].contains("name") ||
            !event["args"]["name"].is_string() ||
            event["args"]["name"].get<std::string>().empty()) {
          problem("thread_name without a name: " + event.dump());
          continue;
        }
        trace.lane_names[event["tid"].get<int64_t>()] = event["args"]["name"].get<std::string>();
      }
    } else if (ph == "X") {
      if (!number("ts") || !number("dur") || !number("tid")) continue;
      TraceSlice slice;
      if (!event.contains("name") || !event["name"].is_string()) {
        problem("X event without a name: " + event.dump());
        continue;
      }
      slice.name = event["name"].get<std::string>();
      slice.tid = event["tid"].get<int64_t>();
      slice.ts = event["ts"].get<double>();
      slice.dur = event["dur"].get<double>();
      if (slice.dur < 0) problem("X event with negative dur: " + event.dump());
      if (!event.contains("args") || !event["args"].is_object() ||
          !event["args"].contains("device") || !event["args"]["device"].is_string()) {
        problem("X event without args.device: " + event.dump());
      } else {
        slice.args = event["args"];
      }
      used_tids.insert(slice.tid);
      trace.slices.push_back(std::move(slice));
    } else if (ph == "s" || ph == "f") {
      if (!number("ts") || !number("tid")) continue;
      if (!event.contains("id")) {
        problem("flow event without id: " + event.dump());
        continue;
      }
      TraceFlow& flow = trace.flows[event["id"].dump()];
      int64_t tid = event["tid"].get<int64_t>();
      used_tids.insert(tid);
      if (ph == "s") {
        ++flow.starts;
        flow.s_tid = tid;
        flow.s_ts = event["ts"].get<double>();
      } else {
        ++flow.finishes;
        flow.f_tid = tid;
        flow.f_ts = event["ts"].get<double>();
        flow.f_binding = event.value("bp", "");
      }
    } else if (ph == "C") {
      if (!number("ts")) continue;
      if (!event.contains("args") || !event["args"].contains("value") ||
          !event["args"]["value"].is_number()) {
        problem("C event without numeric args.value: " + event.dump());
        continue;
      }
      trace.counters.push_back({event.value("name", ""), event["ts"].get<double>(),
                                event["args"]["value"].get<double>()});
    }
  }
  for (int64_t tid : used_tids) {
    if (!trace.lane_names.count(tid)) problem("tid " + std::to_string(tid) + " has no thread_name");
  }
  auto inside_slice = [&](int64_t tid, double ts) {
    for (const auto& s : trace.slices) {
      if (s.tid == tid && ts >= s.ts - kTraceTimeSlackUs && ts <= s.end() + kTraceTimeSlackUs) {
        return true;
      }
    }
    return false;
  };
  for (const auto& [id, flow] : trace.flows) {
    if (flow.starts != 1 || flow.finishes != 1) {
      problem("flow " + id + " has " + std::to_string(flow.starts) + " starts and " +
              std::to_string(flow.finishes) + " finishes");
      continue;
    }
    if (flow.f_binding != "e") problem("flow " + id + " finish is not bound with \"bp\":\"e\"");
    if (!inside_slice(flow.s_tid, flow.s_ts)) {
      problem("flow " + id + " starts outside every slice of its tid");
    }
    if (!inside_slice(flow.f_tid, flow.f_ts)) {
      problem("flow " + id + " finishes outside every slice of its tid");
    }
  }
  return trace;
}

}  // namespace weft::testing
