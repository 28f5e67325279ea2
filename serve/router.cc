// The routes of `weft serve` (see router.h).
#include "serve/router.h"

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "base/error.h"
#include "serve/batcher.h"
#include "serve/client_message.h"
#include "serve/codec.h"
#include "serve/metrics.h"
#include "serve/repository.h"

namespace weft::serve {

namespace {

using json = nlohmann::json;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "multipart/form-data; boundary=x" → "multipart/form-data".
std::string media_type(const std::string& content_type) {
  std::string t = lower(content_type.substr(0, content_type.find(';')));
  while (!t.empty() && t.back() == ' ') t.pop_back();
  while (!t.empty() && t.front() == ' ') t.erase(t.begin());
  return t;
}

// Invalid UTF-8 (request bytes that were not passed through printable()) is replaced rather than
// thrown on: an error response must not itself fail (every request gets exactly one answer).
HttpResponse json_response(int status, const json& value) {
  HttpResponse r;
  r.status = status;
  r.body = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

// Which route a path names; `model` for the two per-model routes.
struct Route {
  enum Kind { kHealth, kMetrics, kModels, kModel, kInfer, kNone } kind = kNone;
  std::string model;
};

Route route_of(const std::string& path) {
  if (path == "/v1/health") return {Route::kHealth, ""};
  if (path == "/metrics") return {Route::kMetrics, ""};
  if (path == "/v1/models") return {Route::kModels, ""};
  const std::string prefix = "/v1/models/";
  if (path.rfind(prefix, 0) != 0) return {};
  std::string rest = path.substr(prefix.size());
  if (rest.size() > 6 && rest.ends_with("/infer")) {
    return {Route::kInfer, rest.substr(0, rest.size() - 6)};
  }
  return {Route::kModel, rest};
}

std::string path_of(const HttpRequest& request) {
  return request.target.substr(0, request.target.find('?'));
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

json describe(const Model& m) {
  json inputs = json::array();
  for (const InputSpec& in : m.config.inputs) {
    inputs.push_back({{"name", in.name},
                      {"shape", std::vector<int64_t>(in.shape.begin(), in.shape.end())},
                      {"dtype", "float32"}});
  }
  json outputs = json::array();
  for (const std::string& name : m.output_names) outputs.push_back({{"name", name}});
  return {{"name", m.name},
          {"version", m.version},
          {"inputs", inputs},
          {"outputs", outputs},
          {"max_batch", m.config.max_batch},
          {"batch_sizes", m.config.batch_sizes},
          {"max_delay_ms", m.config.max_delay_ms},
          {"queue_capacity", m.config.queue_capacity},
          {"batchable", m.batchable},
          {"weights", m.weights_source}};
}

enum class Form { kNpy, kMultipart, kJson };

// Why the body could not be read: 400, or 415 for a Content-Type the endpoint does not take.
struct BodyError {
  int status;
  std::string message;
};

// The body form a Content-Type names, or nullopt for one the endpoint does not take.
std::optional<Form> form_of(const std::string& content_type) {
  const std::string type = media_type(content_type);
  if (type == "application/x-npy" || type == "application/octet-stream") return Form::kNpy;
  if (type == "multipart/form-data") return Form::kMultipart;
  if (type == "application/json") return Form::kJson;
  return std::nullopt;
}

std::string unsupported_media_type(const std::string& content_type) {
  return "Content-Type '" + printable(content_type) +
         "' is not accepted: send application/x-npy, multipart/form-data (.npy parts) or "
         "application/json";
}

// The request's named tensors, from whichever form it came in.
std::vector<std::pair<std::string, HostTensor>> read_inputs(const HttpRequest& req, const Model& m,
                                                            Form& form) {
  const std::optional<Form> found = form_of(req.content_type);
  if (!found) throw BodyError{415, unsupported_media_type(req.content_type)};
  form = *found;
  std::vector<std::pair<std::string, HostTensor>> named;
  if (form == Form::kNpy) {
    if (m.config.inputs.size() != 1) {
      throw BodyError{400, "model '" + m.name + "' has " + std::to_string(m.config.inputs.size()) +
                               " inputs: send them as multipart/form-data parts or JSON"};
    }
    const std::string& name = m.config.inputs[0].name;
    named.emplace_back(name, decode_npy(req.body, "the body (input '" + name + "')"));
  } else if (form == Form::kMultipart) {
    auto boundary = multipart_boundary(req.content_type);
    if (!boundary) throw BodyError{400, "multipart/form-data without a boundary parameter"};
    for (Part& p : parse_multipart(req.body, *boundary)) {
      named.emplace_back(p.name, decode_npy(p.body, "part '" + p.name + "'"));
    }
  } else {
    json j;
    try {
      j = parse_json_body(req.body);  // bounds the nesting (kMaxJsonBodyDepth) before parsing
    } catch (const json::exception& e) {
      throw BodyError{400, std::string("the body is not valid JSON: ") + e.what()};
    }
    if (!j.is_object() || !j.contains("inputs") || !j["inputs"].is_object()) {
      throw BodyError{400, "expected a JSON object {\"inputs\": {\"NAME\": nested lists, ...}}"};
    }
    for (const auto& [name, value] : j["inputs"].items()) {
      named.emplace_back(name, json_to_tensor(value, "inputs." + name));
    }
  }
  return named;
}

HttpResponse render(const InferReply& reply, Form form, bool want_json) {
  const Model& m = *reply.model;
  HttpResponse r;
  r.headers.emplace_back("X-Weft-Model-Version", std::to_string(m.version));
  if (form == Form::kJson || want_json) {
    json outputs = json::object(), shapes = json::object();
    for (size_t h = 0; h < reply.outputs.size(); ++h) {
      const HostTensor& t = reply.outputs[h];
      outputs[m.output_names[h]] = tensor_to_json(t);
      shapes[m.output_names[h]] = std::vector<int64_t>(t.shape.begin(), t.shape.end());
    }
    r.body =
        json{{"model", m.name}, {"version", m.version}, {"outputs", outputs}, {"shapes", shapes}}
            .dump();
    return r;
  }
  if (form == Form::kNpy && reply.outputs.size() == 1) {
    r.content_type = "application/x-npy";
    r.body = encode_npy(reply.outputs[0]);
    return r;
  }
  std::vector<Part> parts;
  for (size_t h = 0; h < reply.outputs.size(); ++h) {
    parts.push_back({m.output_names[h], "application/x-npy", encode_npy(reply.outputs[h])});
  }
  // A boundary that cannot occur in the parts: npy bodies are mostly binary, so check.
  std::string boundary = "weft-boundary-7b1e3f";
  for (int attempt = 0;; ++attempt) {
    bool clash = false;
    for (const Part& p : parts) clash = clash || p.body.find(boundary) != std::string::npos;
    if (!clash) break;
    boundary += std::to_string(attempt);
  }
  r.content_type = "multipart/form-data; boundary=" + boundary;
  r.body = write_multipart(parts, boundary);
  return r;
}

}  // namespace

HttpResponse error_response(int status, const std::string& message) {
  return json_response(status, json{{"error", message}});
}

bool equal_in_constant_time(const std::string& a, const std::string& b) {
  // Every byte of the longer string is compared, and the differences are OR-ed without an
  // early exit, so the time says nothing about the first difference.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::optional<HttpResponse> Router::refusal(const HttpRequest& request, const std::string& path,
                                            bool shutting_down) {
  const Route route = route_of(path);
  std::string label;  // the model the refusal is counted under
  auto refuse = [&](HttpResponse&& r) {
    metrics_.request(label, r.status, 0, false);
    return std::optional<HttpResponse>(std::move(r));
  };
  auto method_not_allowed = [&](const char* allow) {
    HttpResponse r = error_response(405, "method " + request.method + " is not allowed on " +
                                             printable(path) + " (allowed: " + allow + ")");
    r.headers.emplace_back("Allow", allow);
    return refuse(std::move(r));
  };
  // The token is compared in constant time; a missing token is told apart from a wrong one in
  // the WWW-Authenticate header (RFC 6750, section 3.1).
  const bool open = access_.token.empty() ||
                    (route.kind == Route::kHealth && !access_.protect_health) ||
                    (route.kind == Route::kMetrics && !access_.protect_metrics);
  if (!open) {
    const std::string& header = request.authorization;
    const size_t space = header.find(' ');
    const bool bearer = space != std::string::npos && iequals(header.substr(0, space), "Bearer");
    const size_t start = bearer ? header.find_first_not_of(' ', space) : std::string::npos;
    std::string given = start == std::string::npos ? "" : header.substr(start);
    while (!given.empty() && given.back() == ' ') given.pop_back();
    if (!bearer || !equal_in_constant_time(given, access_.token)) {
      HttpResponse r = error_response(
          401, header.empty() ? "this route needs a bearer token (Authorization: Bearer TOKEN)"
                              : "the bearer token is not valid");
      r.headers.emplace_back("WWW-Authenticate", header.empty() ? "Bearer realm=\"weft\""
                                                                : "Bearer realm=\"weft\", "
                                                                  "error=\"invalid_token\"");
      return refuse(std::move(r));
    }
  }
  switch (route.kind) {
    case Route::kHealth:
    case Route::kMetrics:
      if (request.method != "GET") return method_not_allowed("GET");
      return std::nullopt;
    case Route::kNone:
      return refuse(error_response(404, "no route " + printable(path) +
                                            " (routes: GET /v1/health, GET /v1/models, GET "
                                            "/v1/models/NAME, POST /v1/models/NAME/infer, "
                                            "GET /metrics)"));
    default:
      break;
  }
  if (shutting_down) {
    HttpResponse r = error_response(503, "the server is shutting down");
    r.headers.emplace_back("Retry-After", "1");
    return refuse(std::move(r));
  }
  if (route.kind == Route::kModels) {
    if (request.method != "GET") return method_not_allowed("GET");
    return std::nullopt;
  }
  if (route.model.find('/') != std::string::npos || !repository_.find(route.model)) {
    return refuse(error_response(404, "no model '" + printable(route.model) + "' is served"));
  }
  if (route.kind == Route::kModel) {
    if (request.method != "GET") return method_not_allowed("GET");
    return std::nullopt;
  }
  if (request.method != "POST") return method_not_allowed("POST");
  if (!form_of(request.content_type)) {
    label = route.model;
    return refuse(error_response(415, unsupported_media_type(request.content_type)));
  }
  return std::nullopt;
}

std::optional<HttpResponse> Router::refuse_early(const HttpRequest& head, bool shutting_down) {
  return refusal(head, path_of(head), shutting_down);
}

void Router::handle(HttpRequest&& request, bool shutting_down,
                    std::function<void(HttpResponse&&)> respond) {
  const std::string path = path_of(request);
  if (auto r = refusal(request, path, shutting_down)) {
    return respond(std::move(*r));
  }
  auto finish = [&](HttpResponse&& r, const std::string& model) {
    metrics_.request(model, r.status, 0, false);
    respond(std::move(r));
  };
  const Route route = route_of(path);
  switch (route.kind) {
    case Route::kHealth:
      if (shutting_down) return finish(json_response(503, {{"status", "shutting down"}}), "");
      return finish(json_response(200, {{"status", "ok"}, {"models", repository_.models().size()}}),
                    "");
    case Route::kMetrics: {
      HttpResponse r;
      r.content_type = "text/plain; version=0.0.4";
      r.body = metrics_.prometheus();
      return finish(std::move(r), "");
    }
    case Route::kModels: {
      json list = json::array();
      for (const auto& m : repository_.models()) list.push_back(describe(*m));
      return finish(json_response(200, {{"models", list}}), "");
    }
    case Route::kModel: {
      // The model may have been unloaded since refusal() looked.
      std::shared_ptr<Batcher> batcher = repository_.find(route.model);
      if (!batcher) {
        return finish(error_response(404, "no model '" + printable(route.model) + "' is served"),
                      "");
      }
      return finish(json_response(200, describe(*batcher->model())), route.model);
    }
    case Route::kInfer:
      return infer(std::move(request), route.model, std::move(respond));
    case Route::kNone:
      break;
  }
  WEFT_ICHECK(false) << "route of " << printable(path) << " not answered";
}

void Router::infer(HttpRequest&& request, const std::string& name,
                   std::function<void(HttpResponse&&)> respond) {
  std::shared_ptr<Batcher> batcher = repository_.find(name);
  if (!batcher) {  // unloaded since refusal() looked
    metrics_.request("", 404, 0, false);
    return respond(error_response(404, "no model '" + name + "' is served"));
  }
  const auto arrival = request.arrival;
  Metrics* metrics = &metrics_;
  auto answer = [metrics, name, arrival](const std::function<void(HttpResponse &&)>& out,
                                         HttpResponse&& r) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - arrival).count();
    metrics->request(name, r.status, seconds, r.status == 200);
    out(std::move(r));
  };
  std::shared_ptr<const Model> model = batcher->model();
  Form form = Form::kJson;
  InferRequest job;
  try {
    job.inputs = validate_inputs(*model, read_inputs(request, *model, form));
  } catch (const BodyError& e) {
    return answer(respond, error_response(e.status, e.message));
  } catch (const std::exception& e) {
    return answer(respond, error_response(400, printable(client_message(e))));
  }
  const bool want_json = media_type(request.accept) == "application/json";
  job.arrival = arrival;
  auto shared_respond = std::make_shared<std::function<void(HttpResponse &&)>>(std::move(respond));
  job.done = [answer, shared_respond, form, want_json](InferReply&& reply) {
    if (reply.status != 200) {
      return answer(*shared_respond, error_response(reply.status, printable(reply.error)));
    }
    HttpResponse r;
    try {
      r = render(reply, form, want_json);
      char queued[32];
      std::snprintf(queued, sizeof queued, "%.3f", reply.queue_seconds * 1e3);
      r.headers.emplace_back("X-Weft-Queue-Ms", queued);
    } catch (const std::exception& e) {  // out of memory, say: answer with the error instead
      r = error_response(500, "the response could not be written: " + client_message(e));
    }
    answer(*shared_respond, std::move(r));
  };
  switch (batcher->submit(std::move(job))) {
    case Admit::kQueued:
      return;
    case Admit::kQueueFull: {
      HttpResponse r = error_response(503, "model '" + name + "': the queue is full (" +
                                               std::to_string(model->config.queue_capacity) +
                                               " requests); retry later");
      r.headers.emplace_back("Retry-After", "1");
      return answer(*shared_respond, std::move(r));
    }
    case Admit::kStopped: {
      HttpResponse r = error_response(503, "model '" + name +
                                               "' is unloading or the server is "
                                               "shutting down");
      r.headers.emplace_back("Retry-After", "1");
      return answer(*shared_respond, std::move(r));
    }
  }
}

}  // namespace weft::serve
