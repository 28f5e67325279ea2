// Loading a served model (see model.h).
#include "serve/model.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/error.h"
#include "graph/executor.h"
#include "graph/infer.h"
#include "graph/init_values.h"
#include "graph/json.h"
#include "ndarray/io.h"

namespace weft::serve {

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in) << path.string() << ": cannot be read";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// "arg:name" / "aux:name" / "name" → (kind, name).
std::pair<std::string, std::string> split_name(const std::string& full) {
  if (full.rfind("arg:", 0) == 0) return {"arg", full.substr(4)};
  if (full.rfind("aux:", 0) == 0) return {"aux", full.substr(4)};
  return {"", full};
}

std::unique_ptr<graph::Executor> bind_at(const Model& m, int64_t batch) {
  graph::BindOptions bo;
  bo.device = m.device;
  for (const InputSpec& in : m.config.inputs) bo.inputs.shapes[in.name] = in.shape;
  bo.inputs.batch = batch;
  return graph::Executor::bind(m.graph, bo, m.args, m.aux);
}

}  // namespace

ModelConfig parse_model_config(const std::string& text, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    WEFT_THROW(ValueError) << what << ": not valid JSON: " << e.what();
  }
  WEFT_CHECK(j.is_object()) << what << ": expected a JSON object";
  static const std::set<std::string> known = {"inputs",          "max_batch",   "max_delay_ms",
                                              "queue_capacity",  "batch_sizes", "warmup",
                                              "extra_executors", "seed"};
  for (const auto& [key, value] : j.items()) {
    WEFT_CHECK(known.count(key)) << what << ": unknown key '" << key
                                 << "' (known: inputs, max_batch, max_delay_ms, queue_capacity, "
                                    "batch_sizes, warmup, extra_executors, seed)";
  }
  ModelConfig c;
  WEFT_CHECK(j.contains("inputs") && j["inputs"].is_array() && !j["inputs"].empty())
      << what << ": 'inputs' must be a non-empty list of {\"name\", \"shape\"}";
  for (size_t i = 0; i < j["inputs"].size(); ++i) {
    const auto& in = j["inputs"][i];
    const std::string where = what + ": inputs[" + std::to_string(i) + "]";
    WEFT_CHECK(in.is_object() && in.contains("name") && in["name"].is_string() &&
               in.contains("shape") && in["shape"].is_array() && !in["shape"].empty())
        << where << ": expected {\"name\": string, \"shape\": [batch, ...]}";
    InputSpec spec;
    spec.name = in["name"].get<std::string>();
    std::vector<int64_t> dims;
    for (size_t d = 0; d < in["shape"].size(); ++d) {
      WEFT_CHECK(in["shape"][d].is_number_integer())
          << where << ".shape[" << d << "] is not an integer";
      const int64_t v = in["shape"][d].get<int64_t>();
      if (d == 0) {
        WEFT_CHECK(v <= 0) << where << ".shape[0] is " << v
                           << ": the first dimension is the batch; write 0 or -1";
        dims.push_back(-1);
      } else {
        WEFT_CHECK(v > 0) << where << ".shape[" << d << "] is " << v << ", must be positive";
        dims.push_back(v);
      }
    }
    spec.shape = Shape(dims);
    for (const InputSpec& other : c.inputs) {
      WEFT_CHECK(other.name != spec.name) << where << ": input '" << spec.name << "' listed twice";
    }
    c.inputs.push_back(std::move(spec));
  }
  auto integer = [&](const char* key, int64_t& dst, int64_t low, int64_t high) {
    if (!j.contains(key)) return;
    WEFT_CHECK(j[key].is_number_integer() && j[key].get<int64_t>() >= low &&
               j[key].get<int64_t>() <= high)
        << what << ": '" << key << "' must be an integer in [" << low << ", " << high << "], got "
        << j[key].dump();
    dst = j[key].get<int64_t>();
  };
  integer("max_batch", c.max_batch, 1, 4096);
  integer("queue_capacity", c.queue_capacity, 1, 1 << 20);
  integer("extra_executors", c.extra_executors, 1, 1024);
  if (j.contains("seed")) {
    WEFT_CHECK(j["seed"].is_number_unsigned())
        << what << ": 'seed' must be an integer in [0, 2^64), got " << j["seed"].dump();
    c.seed = j["seed"].get<uint64_t>();
  }
  if (j.contains("batch_sizes")) {
    const auto& list = j["batch_sizes"];
    WEFT_CHECK(list.is_array() && !list.empty())
        << what << ": 'batch_sizes' must be a non-empty list of increasing positive integers";
    for (size_t i = 0; i < list.size(); ++i) {
      WEFT_CHECK(list[i].is_number_integer() && list[i].get<int64_t>() >= 1 &&
                 list[i].get<int64_t>() <= 4096 &&
                 (c.batch_sizes.empty() || list[i].get<int64_t>() > c.batch_sizes.back()))
          << what << ": batch_sizes[" << i << "] is " << list[i].dump()
          << "; the list must increase, each in [1, 4096]";
      c.batch_sizes.push_back(list[i].get<int64_t>());
    }
    if (j.contains("max_batch")) {
      WEFT_CHECK(c.batch_sizes.back() == c.max_batch)
          << what << ": the largest of batch_sizes (" << c.batch_sizes.back()
          << ") must equal max_batch (" << c.max_batch << ")";
    }
    c.max_batch = c.batch_sizes.back();
  } else {
    for (int64_t b = 1; b < c.max_batch; b *= 2) c.batch_sizes.push_back(b);
    c.batch_sizes.push_back(c.max_batch);
  }
  if (j.contains("warmup")) {
    WEFT_CHECK(j["warmup"].is_boolean()) << what << ": 'warmup' must be true or false";
    c.warmup = j["warmup"].get<bool>();
  }
  if (j.contains("max_delay_ms")) {
    WEFT_CHECK(j["max_delay_ms"].is_number() && j["max_delay_ms"].get<double>() >= 0 &&
               j["max_delay_ms"].get<double>() <= 60000)
        << what << ": 'max_delay_ms' must be a number in [0, 60000], got "
        << j["max_delay_ms"].dump();
    c.max_delay_ms = j["max_delay_ms"].get<double>();
  }
  return c;
}

int64_t Model::run_size(int64_t rows) const {
  if (!batchable) return rows;
  for (int64_t size : config.batch_sizes) {
    if (size >= rows) return size;
  }
  return rows;  // more rows than max_batch: validate_inputs refuses these
}

bool valid_model_name(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
  });
}

std::string folder_fingerprint(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> entries;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::error_code ec2;
    if (!e.is_regular_file(ec2)) continue;
    const auto size = fs::file_size(e.path(), ec2);
    const auto time = fs::last_write_time(e.path(), ec2).time_since_epoch().count();
    entries.push_back(e.path().filename().string() + ":" + std::to_string(size) + ":" +
                      std::to_string(time));
  }
  if (ec) return "";
  std::sort(entries.begin(), entries.end());
  std::string out;
  for (const std::string& s : entries) out += s + ";";
  return out;
}

std::shared_ptr<const Model> load_model(const std::string& dir, const LoadOptions& options,
                                        int version) {
  auto m = std::make_shared<Model>();
  m->dir = dir;
  m->name = fs::path(dir).filename().string();
  m->version = version;
  m->device = options.device;
  WEFT_CHECK(valid_model_name(m->name))
      << dir << ": '" << m->name << "' is not a valid model name (letters, digits, '.', '_', '-')";
  m->fingerprint = folder_fingerprint(dir);

  std::vector<fs::path> symbols, params;
  bool has_config = false;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string file = e.path().filename().string();
    if (file.ends_with("-symbol.json")) symbols.push_back(e.path());
    if (file.ends_with(".params")) params.push_back(e.path());
    if (file == "config.json") has_config = true;
  }
  WEFT_CHECK(symbols.size() == 1) << dir << ": expected exactly one *-symbol.json, found "
                                  << symbols.size();
  WEFT_CHECK(params.size() <= 1) << dir << ": expected at most one *.params, found "
                                 << params.size();
  WEFT_CHECK(has_config) << dir
                         << ": config.json is missing (it names the inputs and their shapes)";
  const std::string config_path = (fs::path(dir) / "config.json").string();
  m->config = parse_model_config(read_file(config_path), config_path);

  auto g = std::make_shared<graph::Graph>(graph::load_json_file(symbols[0]));
  m->graph = g;
  m->output_names = g->list_outputs();
  for (const InputSpec& in : m->config.inputs) {
    WEFT_CHECK(g->find_variable(in.name) >= 0) << config_path << ": input '" << in.name
                                               << "' is not a variable of " << symbols[0].string();
  }

  // Weights: from the .params file, else drawn from the seed once shapes are known.
  const std::vector<uint32_t> labels = graph::label_variables(*g);
  auto is_input = [&](const std::string& name) {
    return std::any_of(m->config.inputs.begin(), m->config.inputs.end(),
                       [&](const InputSpec& in) { return in.name == name; });
  };
  auto is_label = [&](uint32_t nid) {
    return std::find(labels.begin(), labels.end(), nid) != labels.end();
  };
  // Note [Drawn weights are asked for] in model.h.
  if (params.empty() && !options.previous_params.empty() && !m->config.seed) {
    WEFT_THROW(ValueError) << dir << ": " << options.previous_params << " is gone (version "
                           << version - 1
                           << " loaded its weights from it) and config.json does not ask for "
                              "weights drawn from a seed (\"seed\": N): not loaded, the previous "
                              "version keeps serving until a .params file is back";
  }
  const std::optional<uint64_t> seed = m->config.seed ? m->config.seed : options.seed;
  if (!params.empty()) {
    LoadedArrays loaded = load_arrays(params[0].string(), options.device);
    for (size_t i = 0; i < loaded.names.size(); ++i) {
      auto [kind, name] = split_name(loaded.names[i]);
      if (g->find_variable(name) < 0 || is_input(name)) continue;
      (kind == "aux" ? m->aux : m->args)[name] = loaded.arrays[i];
    }
    m->weights_source = params[0].filename().string();
    m->from_params = true;
  }
  auto exec = bind_at(*m, 1);
  const std::vector<std::string> aux_list = exec->aux_names();
  const std::set<std::string> aux_names(aux_list.begin(), aux_list.end());
  for (uint32_t nid : g->variable_nodes()) {
    const std::string& name = g->nodes[nid].name;
    if (is_input(name) || is_label(nid)) continue;
    const bool aux = aux_names.count(name) > 0;
    if ((aux ? m->aux : m->args).count(name)) continue;
    WEFT_CHECK(params.empty()) << params[0].string() << " has no array for '" << name
                               << "' (expected arg:" << name << " or aux:" << name << ")";
    if (!seed) {
      WEFT_THROW(ValueError)
          << dir << ": no *.params file for the weights of the graph ('" << name
          << "' and others): add NAME-0000.params, or ask for weights drawn from a seed with "
             "\"seed\": N in config.json or `weft serve --seed N`";
    }
    NDArray dst = aux ? exec->aux(name) : exec->arg(name);
    graph::init_variable_seeded(*seed, name, false, dst);
    (aux ? m->aux : m->args)[name] = dst.copy();
    m->weights_source = "seed " + std::to_string(*seed);
  }
  if (m->weights_source.empty()) m->weights_source = "none";
  for (auto& [name, a] : m->args) a.wait_to_read();
  for (auto& [name, a] : m->aux) a.wait_to_read();

  // Batch-first outputs: every output must have the batch as its first dimension at every size
  // a batch runs at, or rows would be split out of an output that does not hold them (a graph
  // keeping min(batch, 2) rows passes at 1 and 2 and fails at 4). Inference only: the executors
  // are bound by the batcher.
  exec.reset();
  if (m->config.max_batch > 1) {
    graph::InferInputs in;
    for (const InputSpec& spec : m->config.inputs) in.shapes[spec.name] = spec.shape;
    for (const auto& [name, a] : m->args) in.fixed_shapes[name] = a.shape();
    for (const auto& [name, a] : m->aux) in.fixed_shapes[name] = a.shape();
    for (int64_t size : m->config.batch_sizes) {
      in.batch = size;
      const graph::InferResult r = graph::infer_shapes_types(*g, in, true);
      for (const graph::NodeEntry& head : g->heads) {
        const Shape& shape = r.shapes[g->entry_id(head)];
        m->batchable = m->batchable && shape.ndim() >= 1 && shape[0] == size;
      }
      if (!m->batchable) break;
    }
  }
  return m;
}

}  // namespace weft::serve
