// The coordinator: one thread per process that negotiates collectives by name through rank 0,
// fuses small allreduces, runs the transport's collectives in the order rank 0 decides, and turns
// silent peers into errors (Note [Negotiation by name] in controller.cc).
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/dist.h"
#include "dist/gpu_collectives.h"
#include "dist/meta.h"
#include "dist/transport.h"

namespace weft::dist::detail {

class Controller {
 public:
  Controller(std::unique_ptr<Transport> transport, const Options& options);
  /// Stops the thread (see stop()) if the user did not.
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  /// Hands a ready collective to the coordinator. Thread-safe; `done` runs on the coordinator's
  /// thread (or here, when the group has already failed or stopped).
  void submit(Request request);
  /// Leaves the group once every rank has asked to: waits for this rank's collectives, then
  /// finalizes the transport (skipped after a failure, when peers may be gone).
  void stop();

  const Transport& transport() const { return *transport_; }
  Stats stats() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry;  // rank 0's view of one key

  void loop();
  bool step_root(std::vector<Request>& fresh, bool stopping, bool* active);
  bool step_peer(std::vector<Request>& fresh, bool stopping, bool* active);
  void note(int rank, const Meta& meta, Clock::time_point now);
  void reject_duplicates(std::vector<Request>& rejected);
  bool execute(const std::string& message);
  void run_group(const std::vector<std::string>& keys);
  void fail_everything(const std::string& why);
  void fail_local_request(Request& request);
  // GPU arrays (controller_gpu.cc): launch a scheduled group over NCCL, complete what finished.
  void run_gpu(std::vector<Request>& group);
  bool poll_gpu();
  void drain_gpu();
  void abort_gpu(const std::string& why);

  std::unique_ptr<Transport> transport_;
  Options options_;
  int rank_ = 0;
  int size_ = 1;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Request> incoming_;
  bool stop_requested_ = false;
  bool stopped_ = false;
  std::string failure_;  // set once the group is unusable
  Stats stats_;

  // Coordinator thread state.
  std::map<std::string, Request> pending_;  // issued here, not yet run
  std::vector<char> fusion_buffer_;
  std::unique_ptr<GpuCollectives> gpu_;  // NCCL, from the first GPU collective on
  Clock::time_point last_sent_{};
  Clock::time_point last_from_root_{};
  bool peer_stopping_sent_ = false;
  // Rank 0 only.
  std::map<std::string, std::unique_ptr<Entry>> table_;
  std::vector<Clock::time_point> last_heard_;
  std::vector<char> stopping_;
  uint64_t next_seq_ = 0;

  std::thread thread_;
};

}  // namespace weft::dist::detail
