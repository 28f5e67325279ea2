// The model repository: every valid folder of DIR loaded with a batcher of its own, watched for
// changes. A changed folder reloads in the background, once it is stable (unchanged between two
// scans), and the new version serves from its next batch; a failed (re)load is logged and
// counted, and the previous version keeps serving; a removed folder unloads once its queued
// requests are done.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/batcher.h"
#include "serve/model.h"

namespace weft::serve {

class Metrics;

struct RepositoryOptions {
  std::string dir;
  LoadOptions load;
  bool batching = true;
  /// How often folders are checked for changes; 0 = never (no watcher thread).
  int reload_ms = 1000;
};

class Repository {
 public:
  /// Loads every model folder (failures are logged and skipped; throws when DIR cannot be read).
  Repository(RepositoryOptions options, Metrics* metrics);
  ~Repository();

  /// The batcher of model `name`, or null.
  std::shared_ptr<Batcher> find(const std::string& name) const;
  /// The models serving now, by name.
  std::vector<std::shared_ptr<const Model>> models() const;
  /// Checks every folder once (the watcher calls this every reload_ms). A new or changed folder
  /// (re)loads when its fingerprint equals the one the previous scan saw (Note [Stable folders]
  /// in repository.cc), so a change takes two scans. Thread-safe (scans run one at a time).
  void scan();
  /// Stops the watcher and drains every batcher (each finishes its queued requests).
  void stop();

 private:
  void watch();
  // scan(); `wait_for_stable` false (the first scan) loads changed folders at once.
  void scan_all(bool wait_for_stable);

  RepositoryOptions options_;
  Metrics* metrics_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Batcher>> batchers_;
  std::map<std::string, std::string> failed_;  // fingerprints of folders whose load failed
  // Fingerprints the last scan saw of folders not serving them yet (Note [Stable folders]).
  std::map<std::string, std::string> last_seen_;
  std::mutex scan_mu_;  // one scan at a time
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace weft::serve
