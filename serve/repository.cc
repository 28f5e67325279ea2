// The model repository (see repository.h).
#include "serve/repository.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "base/error.h"
#include "serve/metrics.h"

namespace weft::serve {

namespace fs = std::filesystem;

Repository::Repository(RepositoryOptions options, Metrics* metrics)
    : options_(std::move(options)), metrics_(metrics) {
  std::error_code ec;
  WEFT_CHECK(fs::is_directory(options_.dir, ec))
      << "--models " << options_.dir << ": not a readable folder";
  scan_all(false);
  if (options_.reload_ms > 0) watcher_ = std::thread([this] { watch(); });
}

Repository::~Repository() { stop(); }

std::shared_ptr<Batcher> Repository::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = batchers_.find(name);
  return it == batchers_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const Model>> Repository::models() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const Model>> out;
  for (const auto& [name, b] : batchers_) out.push_back(b->model());
  return out;
}

void Repository::scan() { scan_all(true); }

// Note [Stable folders]
// A deploy writes a folder's files one after another (remove the old .params, copy the new one,
// edit config.json); a scan in between sees a folder that is neither version. So a folder that
// changed (or appeared) loads only once a scan finds the same fingerprint (names, sizes,
// modification times) as the scan before it: at least one reload interval with no change. The
// first scan, when the server starts, loads what it finds at once. A copy slower than the
// interval can still be caught midway; what protects that window is that a version loaded from
// a .params never gives way to drawn weights (Note [Drawn weights are asked for] in model.h),
// and a failed load keeps the previous version serving.
void Repository::scan_all(bool wait_for_stable) {
  std::lock_guard<std::mutex> scan_lock(scan_mu_);
  std::set<std::string> present;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(options_.dir, ec)) {
    std::error_code ec2;
    if (!e.is_directory(ec2)) continue;
    const std::string name = e.path().filename().string();
    if (!valid_model_name(name)) continue;  // hidden and oddly named folders are not models
    present.insert(name);
    const std::string fingerprint = folder_fingerprint(e.path().string());
    std::shared_ptr<Batcher> current = find(name);
    std::shared_ptr<const Model> serving = current ? current->model() : nullptr;
    if (serving && serving->fingerprint == fingerprint) {
      last_seen_.erase(name);
      continue;
    }
    if (auto f = failed_.find(name); f != failed_.end() && f->second == fingerprint) continue;
    if (wait_for_stable) {  // Note [Stable folders]
      auto [seen, fresh] = last_seen_.try_emplace(name, fingerprint);
      if (fresh || seen->second != fingerprint || fingerprint.empty()) {
        seen->second = fingerprint;
        continue;
      }
    }
    last_seen_.erase(name);
    const int version = serving ? serving->version + 1 : 1;
    LoadOptions load = options_.load;
    if (serving && serving->from_params) load.previous_params = serving->weights_source;
    try {
      std::shared_ptr<const Model> model = load_model(e.path().string(), load, version);
      failed_.erase(name);
      if (metrics_) metrics_->model_load(name, true);
      std::fprintf(stderr, "weft serve: %s model '%s' version %d (%s, weights %s)\n",
                   current ? "reloaded" : "loaded", name.c_str(), version,
                   model->batchable ? "batchable" : "outputs not batch-first: requests run alone",
                   model->weights_source.c_str());
      if (current) {
        current->set_model(std::move(model));
      } else {
        auto b = std::make_shared<Batcher>(std::move(model), options_.batching, metrics_);
        std::lock_guard<std::mutex> lock(mu_);
        batchers_[name] = std::move(b);
      }
    } catch (const std::exception& ex) {
      failed_[name] = fingerprint;
      if (metrics_) metrics_->model_load(name, false);
      std::fprintf(stderr, "weft serve: model '%s' failed to load%s: %s\n", name.c_str(),
                   current ? " (the previous version keeps serving)" : "", ex.what());
    }
  }
  if (ec) {
    std::fprintf(stderr, "weft serve: cannot list %s: %s\n", options_.dir.c_str(),
                 ec.message().c_str());
    return;  // a transient failure must not unload everything
  }
  for (auto it = last_seen_.begin(); it != last_seen_.end();) {
    it = present.count(it->first) ? std::next(it) : last_seen_.erase(it);
  }
  std::vector<std::shared_ptr<Batcher>> removed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = batchers_.begin(); it != batchers_.end();) {
      if (present.count(it->first)) {
        ++it;
        continue;
      }
      std::fprintf(stderr, "weft serve: model '%s' removed, unloading\n", it->first.c_str());
      removed.push_back(std::move(it->second));
      it = batchers_.erase(it);
    }
  }
  for (auto& b : removed) b->stop();  // queued requests still get their answers
}

void Repository::watch() {
  std::unique_lock<std::mutex> lock(watch_mu_);
  while (!watch_cv_.wait_for(lock, std::chrono::milliseconds(options_.reload_ms),
                             [&] { return stopping_; })) {
    lock.unlock();
    try {
      scan();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "weft serve: scanning %s failed: %s\n", options_.dir.c_str(), e.what());
    }
    lock.lock();
  }
}

void Repository::stop() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stopping_ = true;
    watch_cv_.notify_all();
  }
  if (watcher_.joinable()) watcher_.join();
  std::vector<std::shared_ptr<Batcher>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, b] : batchers_) all.push_back(b);
  }
  for (auto& b : all) b->stop();
}

}  // namespace weft::serve
