// The routes of `weft serve` (see router.h).
#include "serve/router.h"

#include <memory>
#include <nlohmann/json.hpp>

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

HttpResponse json_response(int status, const json& value) {
  HttpResponse r;
  r.status = status;
  r.body = value.dump();
  return r;
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

// The request's named tensors, from whichever form it came in.
std::vector<std::pair<std::string, HostTensor>> read_inputs(const HttpRequest& req, const Model& m,
                                                            Form& form) {
  const std::string type = media_type(req.content_type);
  std::vector<std::pair<std::string, HostTensor>> named;
  if (type == "application/x-npy" || type == "application/octet-stream") {
    form = Form::kNpy;
    if (m.config.inputs.size() != 1) {
      throw BodyError{400, "model '" + m.name + "' has " + std::to_string(m.config.inputs.size()) +
                               " inputs: send them as multipart/form-data parts or JSON"};
    }
    const std::string& name = m.config.inputs[0].name;
    named.emplace_back(name, decode_npy(req.body, "the body (input '" + name + "')"));
  } else if (type == "multipart/form-data") {
    form = Form::kMultipart;
    auto boundary = multipart_boundary(req.content_type);
    if (!boundary) throw BodyError{400, "multipart/form-data without a boundary parameter"};
    for (Part& p : parse_multipart(req.body, *boundary)) {
      named.emplace_back(p.name, decode_npy(p.body, "part '" + p.name + "'"));
    }
  } else if (type == "application/json") {
    form = Form::kJson;
    json j;
    try {
      j = json::parse(req.body);
    } catch (const json::exception& e) {
      throw BodyError{400, std::string("the body is not valid JSON: ") + e.what()};
    }
    if (!j.is_object() || !j.contains("inputs") || !j["inputs"].is_object()) {
      throw BodyError{400, "expected a JSON object {\"inputs\": {\"NAME\": nested lists, ...}}"};
    }
    for (const auto& [name, value] : j["inputs"].items()) {
      named.emplace_back(name, json_to_tensor(value, "inputs." + name));
    }
  } else {
    throw BodyError{415, "Content-Type '" + req.content_type +
                             "' is not accepted: send application/x-npy, multipart/form-data "
                             "(.npy parts) or application/json"};
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

void Router::handle(HttpRequest&& request, bool shutting_down,
                    std::function<void(HttpResponse&&)> respond) {
  std::string path = request.target.substr(0, request.target.find('?'));
  auto finish = [&](HttpResponse&& r, const std::string& model) {
    metrics_.request(model, r.status, 0, false);
    respond(std::move(r));
  };
  auto method_not_allowed = [&](const char* allow) {
    HttpResponse r = error_response(405, "method " + request.method + " is not allowed on " + path +
                                             " (allowed: " + allow + ")");
    r.headers.emplace_back("Allow", allow);
    finish(std::move(r), "");
  };
  if (path == "/v1/health") {
    if (request.method != "GET") return method_not_allowed("GET");
    if (shutting_down) return finish(json_response(503, {{"status", "shutting down"}}), "");
    return finish(json_response(200, {{"status", "ok"}, {"models", repository_.models().size()}}),
                  "");
  }
  if (path == "/metrics") {
    if (request.method != "GET") return method_not_allowed("GET");
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = metrics_.prometheus();
    return finish(std::move(r), "");
  }
  if (shutting_down) {
    HttpResponse r = error_response(503, "the server is shutting down");
    r.headers.emplace_back("Retry-After", "1");
    return finish(std::move(r), "");
  }
  if (path == "/v1/models") {
    if (request.method != "GET") return method_not_allowed("GET");
    json list = json::array();
    for (const auto& m : repository_.models()) list.push_back(describe(*m));
    return finish(json_response(200, {{"models", list}}), "");
  }
  const std::string prefix = "/v1/models/";
  if (path.rfind(prefix, 0) == 0) {
    std::string rest = path.substr(prefix.size());
    const bool is_infer = rest.size() > 6 && rest.ends_with("/infer");
    const std::string name = is_infer ? rest.substr(0, rest.size() - 6) : rest;
    std::shared_ptr<Batcher> batcher =
        name.find('/') == std::string::npos ? repository_.find(name) : nullptr;
    if (!batcher) return finish(error_response(404, "no model '" + name + "' is served"), "");
    if (!is_infer) {
      if (request.method != "GET") return method_not_allowed("GET");
      return finish(json_response(200, describe(*batcher->model())), name);
    }
    if (request.method != "POST") return method_not_allowed("POST");
    return infer(std::move(request), name, std::move(respond));
  }
  finish(error_response(404, "no route " + path +
                                 " (routes: GET /v1/health, GET /v1/models, GET "
                                 "/v1/models/NAME, POST /v1/models/NAME/infer, "
                                 "GET /metrics)"),
         "");
}

void Router::infer(HttpRequest&& request, const std::string& name,
                   std::function<void(HttpResponse&&)> respond) {
  std::shared_ptr<Batcher> batcher = repository_.find(name);
  if (!batcher) {
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
    return answer(respond, error_response(400, client_message(e)));
  }
  const bool want_json = media_type(request.accept) == "application/json";
  job.arrival = arrival;
  auto shared_respond = std::make_shared<std::function<void(HttpResponse &&)>>(std::move(respond));
  job.done = [answer, shared_respond, form, want_json](InferReply&& reply) {
    if (reply.status != 200)
      return answer(*shared_respond, error_response(reply.status, reply.error));
    HttpResponse r = render(reply, form, want_json);
    char queued[32];
    std::snprintf(queued, sizeof queued, "%.3f", reply.queue_seconds * 1e3);
    r.headers.emplace_back("X-Weft-Queue-Ms", queued);
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
