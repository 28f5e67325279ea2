// NCCL under the coordinator (gpu_collectives.h): the communicator, bootstrapped over the MPI
// transport, and the collectives of GPU arrays launched on the engine operations' streams.
//
// Note [Collectives on GPU streams]
// A collective of GPU arrays is an asynchronous engine operation on the arrays' GPU (dist.cc).
// The engine runs its body on a GPU worker after making that worker's stream wait for the
// inputs' producers (gpu_before_run); the body only hands the coordinator a request carrying the
// stream (RunContext::stream). Ordering goes through rank 0 exactly as for CPU arrays (Note
// [Negotiation by name] in controller.cc); when the schedule reaches the request, the
// coordinator thread enqueues the NCCL call on that stream — behind the producers in stream
// order, with no host wait — records an event after it and goes on. It queries the event on its
// later rounds (it polls while anything is in flight) and completes the engine operation once
// the event has completed. Completing only then is what orders the readers: the engine takes an
// asynchronous GPU operation completed from a thread other than its worker as finished work and
// hangs no stream mark on its variables (Note [GPU var events] in engine/var.h). The price is
// that readers start one poll round (microseconds while busy) after the collective ends rather
// than queued behind it on the stream.
//
// NCCL calls of one communicator must be issued in the same order on every rank (the schedule
// does that) and must not overlap on different streams: a launch on another stream than the
// previous one first waits (cudaStreamWaitEvent) for the previous launch's event.
//
// Fusion: the allreduces rank 0 fuses (same dtype and operation, at most fusion_bytes) launch as
// one NCCL group (ncclGroupStart/End) on the first request's stream, without copies into a
// fusion buffer; the other requests' streams are joined by events recorded on them at launch.
// Mean is NCCL's ncclAvg (floating types scale each input by 1/size before summing; integer types
// divide the sum, truncating).
//
// Failures: a batch in flight longer than the timeout, or an asynchronous NCCL error
// (ncclCommGetAsyncError), aborts the communicator (ncclCommAbort, which stops NCCL's kernels)
// and fails every collective in flight; so does any failure of the group (a silent rank), through
// Controller::fail_everything. The communicator is not rebuilt: later GPU collectives fail.
//
// Note [Abortable bootstrap]
// The communicator is made by the coordinator thread, which meanwhile neither sends nor reads
// heartbeats, so a rank that died between issuing its first GPU collective and the bootstrap
// would leave the others waiting inside it for ever: in MPI_Bcast of the ncclUniqueId (rank 0
// died) or in ncclCommInitRank (any rank died). Both steps are therefore non-blocking and share
// one deadline, the group's timeout (Options::timeout_s, WEFT_DIST_TIMEOUT: the setting after
// which the coordinator declares a silent rank dead): the id travels by MPI_Ibcast polled with
// MPI_Test (Transport::broadcast_until), and the communicator is created with
// config.blocking = 0 (ncclCommInitRankConfig), then polled with ncclCommGetAsyncError until it
// leaves ncclInProgress. Past the deadline, ncclCommAbort stops NCCL's bootstrap threads and a
// DistError names this rank, its GPU and the timeout; the controller fails the group, and every
// surviving rank fails the same way by its own deadline. The timeout must therefore exceed the
// time NCCL needs to set up (seconds on large groups). A broadcast given up that way is left to
// MPI (its request can be neither cancelled nor freed), which is why the group must fail.
// A non-blocking communicator stays non-blocking: any later call may return ncclInProgress before
// its kernels are on the stream (NCCL connects to peers lazily), so launch() waits for the state
// to settle, within the timeout, before recording the event that readers wait for; teardown
// (ncclCommFinalize) is polled the same way and aborted past the timeout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <thread>

#include "devices/device_api.h"
#include "dist/gpu_collectives.h"

// WEFT_USE_NCCL: defined by dist/CMakeLists.txt for this layer when NCCL was found.
#if defined(WEFT_USE_NCCL) && WEFT_USE_NCCL
#include <nccl.h>
#endif

namespace weft::dist::detail {

Device process_gpu(int local_rank) {
  int count = 0;
  if (DeviceAPI* api = DeviceAPI::try_get(DeviceType::kCUDA)) {
    try {
      count = api->device_count();
    } catch (const std::exception&) {
      count = 0;  // no driver: the caller's array cannot be on a GPU anyway
    }
  }
  return Device::cuda(count > 0 ? local_rank % count : 0);
}

#if !defined(WEFT_USE_NCCL) || !WEFT_USE_NCCL

bool have_nccl() { return false; }
bool nccl_supports(DType) { return false; }

std::unique_ptr<GpuCollectives> make_nccl_collectives(Transport&, Device, double) {
  throw NotImplemented(
      "dist: weft was built without NCCL (configure with CUDA, MPI and NCCL found, or "
      "-DWEFT_USE_NCCL=ON), so collectives of GPU arrays are not available");
}

#else

bool have_nccl() { return true; }

namespace {

using Clock = std::chrono::steady_clock;

bool nccl_type(DType dtype, ncclDataType_t* out) {
  switch (dtype) {
    case DType::kFloat32:
      *out = ncclFloat32;
      return true;
    case DType::kFloat64:
      *out = ncclFloat64;
      return true;
    case DType::kFloat16:
      *out = ncclFloat16;
      return true;
    case DType::kBFloat16:
      *out = ncclBfloat16;
      return true;
    case DType::kInt32:
      *out = ncclInt32;
      return true;
    case DType::kInt64:
      *out = ncclInt64;
      return true;
    case DType::kInt8:
      *out = ncclInt8;
      return true;
    case DType::kUInt8:
      *out = ncclUint8;
      return true;
    case DType::kUInt32:
      *out = ncclUint32;
      return true;
    case DType::kUInt64:
      *out = ncclUint64;
      return true;
    default:
      return false;
  }
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMean:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kProd:
      return ncclProd;
  }
  throw InternalError("dist: unknown reduce op");
}

// Throws DistError "dist: <what>: <call> failed: <NCCL's text> (<its last error>)". The
// communicator is non-blocking (Note [Abortable bootstrap]): ncclInProgress only says that the
// call goes on in the background, and the caller settles it (settle()) before relying on it.
void check_nccl(ncclResult_t result, const char* call, const std::string& what, ncclComm_t comm) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  std::string message = "dist: " + what + ": " + call + " failed: " + ncclGetErrorString(result);
  const char* detail = ncclGetLastError(comm);
  if (detail != nullptr && *detail != '\0') message += std::string(" (") + detail + ")";
  throw DistError(message);
}

class NcclCollectives final : public GpuCollectives {
 public:
  NcclCollectives(Transport& transport, Device device, double timeout_s)
      : device_(device),
        api_(DeviceAPI::get(DeviceType::kCUDA)),
        timeout_(
            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s))),
        timeout_s_(timeout_s),
        rank_(transport.rank()) {
    // Note [Abortable bootstrap]: one deadline, the group's timeout, covers both steps.
    const Clock::time_point deadline = Clock::now() + timeout_;
    const std::string what = "the NCCL communicator on " + to_string(device);
    api_->set_device(device);  // the coordinator thread's device from here on
    ncclUniqueId id{};
    if (rank_ == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", what, nullptr);
    if (!transport.broadcast_until(&id, sizeof(id), 0, deadline)) {
      throw DistError(bootstrap_failure(
          "rank 0's ncclUniqueId did not arrive (MPI_Ibcast) within the timeout: rank 0, or a "
          "rank the broadcast passes through, died, hangs, or never reached its first GPU "
          "collective"));
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t started =
        ncclCommInitRankConfig(&comm_, transport.size(), id, rank_, &config);
    if (started != ncclSuccess && started != ncclInProgress) {
      std::string why = std::string("ncclCommInitRankConfig failed: ") +
                        ncclGetErrorString(started) + last_error(comm_);
      if (comm_ != nullptr) ncclCommAbort(comm_);
      comm_ = nullptr;
      throw DistError(bootstrap_failure(why));
    }
    bool late = false;
    const ncclResult_t state = settle(deadline, &late);
    if (late || state != ncclSuccess) {
      std::string why =
          late ? "ncclCommInitRankConfig did not finish within the timeout: a rank died or hangs "
                 "before joining, or cannot reach this one"
               : std::string("ncclCommInitRankConfig failed: ") + ncclGetErrorString(state) +
                     last_error(comm_);
      ncclCommAbort(comm_);  // stops NCCL's bootstrap threads; the communicator is gone
      comm_ = nullptr;
      throw DistError(bootstrap_failure(why + "; the communicator was aborted"));
    }
  }

  ~NcclCollectives() override {
    if (comm_ == nullptr || aborted_) return;
    // Nothing is in flight (the coordinator drained it); errors at teardown are only reported.
    // Finalizing a non-blocking communicator goes on in the background and waits for the peers:
    // bounded by the timeout like everything else, then aborted.
    ncclResult_t result = ncclCommFinalize(comm_);
    bool late = false;
    if (result == ncclSuccess || result == ncclInProgress) {
      result = settle(Clock::now() + timeout_, &late);
    }
    if (result == ncclSuccess && !late) {
      result = ncclCommDestroy(comm_);
      if (result == ncclInProgress) result = ncclSuccess;  // freed in the background
    } else {
      ncclCommAbort(comm_);
    }
    if (late) {
      std::fprintf(stderr,
                   "weft dist: releasing the NCCL communicator on %s: ncclCommFinalize did not "
                   "finish within %g s; aborted it\n",
                   to_string(device_).c_str(), timeout_s_);
    } else if (result != ncclSuccess) {
      std::fprintf(stderr, "weft dist: releasing the NCCL communicator: %s\n",
                   ncclGetErrorString(result));
    }
  }

  void launch(std::vector<Request>& group) override {
    const Request& first = group.front();
    if (aborted_) {
      throw DistError("dist: " + describe(first.meta) +
                      ": the NCCL communicator was aborted earlier: " + abort_reason_);
    }
    const Stream stream = first.stream;
    if (stream.handle == nullptr || stream.device != device_) {
      throw InternalError("dist: " + describe(first.meta) + " reached NCCL without a stream of " +
                          to_string(device_));
    }
    // One communicator's calls never overlap: wait for the previous launch when it went to
    // another stream (on the device: cudaStreamWaitEvent).
    if (last_ && last_stream_ != stream.handle) last_->block(stream);
    for (size_t i = 1; i < group.size(); ++i) {
      if (group[i].stream.handle == stream.handle) continue;
      Event joined = api_->create_event(device_);
      joined.record(group[i].stream);  // covers the producers of that request's input
      joined.block(stream);
    }
    if (group.size() > 1)
      check_nccl(ncclGroupStart(), "ncclGroupStart", describe(first.meta), comm_);
    try {
      for (const Request& r : group) enqueue(r, stream);
    } catch (...) {
      if (group.size() > 1) ncclGroupEnd();
      throw;
    }
    if (group.size() > 1) check_nccl(ncclGroupEnd(), "ncclGroupEnd", describe(first.meta), comm_);
    // On a non-blocking communicator the calls above may return before the kernels are on the
    // stream (NCCL still connecting to peers in the background); the event must come after them.
    bool late = false;
    const ncclResult_t state = settle(Clock::now() + timeout_, &late);
    if (late) {
      fail("dist: " + describe(first.meta) + " on " + to_string(device_) + ": NCCL did not " +
           "enqueue it within " + seconds_text() + " s (timeout; a peer died or hangs while " +
           "NCCL connects to it); the NCCL communicator was aborted");
    }
    if (state != ncclSuccess) {
      fail("dist: " + describe(first.meta) + " on " + to_string(device_) + ": NCCL failed: " +
           ncclGetErrorString(state) + last_error(comm_) + "; the NCCL communicator was aborted");
    }
    auto finished = std::make_shared<Event>(api_->create_event(device_));
    finished->record(stream);
    last_ = finished;
    last_stream_ = stream.handle;
    flights_.push_back(Flight{std::move(group), std::move(finished), Clock::now()});
    group.clear();
  }

  int poll() override {
    if (flights_.empty()) return 0;
    ncclResult_t async = ncclSuccess;
    ncclResult_t result = ncclCommGetAsyncError(comm_, &async);
    if (result != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
      std::string why = std::string("dist: NCCL reported an error on ") + to_string(device_) +
                        ": " + ncclGetErrorString(result != ncclSuccess ? result : async);
      const char* detail = ncclGetLastError(comm_);
      if (detail != nullptr && *detail != '\0') why += std::string(" (") + detail + ")";
      fail(why);
    }
    int completed = 0;
    // Launches are serialised on the device, so they finish in launch order.
    while (!flights_.empty() && flights_.front().finished->query()) {
      Flight flight = std::move(flights_.front());
      flights_.pop_front();
      for (auto& r : flight.requests) r.done(nullptr);
      completed += static_cast<int>(flight.requests.size());
    }
    if (!flights_.empty() && Clock::now() - flights_.front().launched > timeout_) {
      fail("dist: " + describe(flights_.front().requests.front().meta) + " on " +
           to_string(device_) + ": NCCL did not finish within " + seconds_text() +
           " s (a peer died or hangs inside the collective, or its GPU is stuck); the NCCL "
           "communicator was aborted");
    }
    return completed;
  }

  bool busy() const override { return !flights_.empty(); }

  void abort(const std::string& why) override {
    if (!aborted_) {
      aborted_ = true;
      abort_reason_ = why;
      // Stops NCCL's kernels and frees the communicator; its result is of no further use.
      if (comm_ != nullptr) ncclCommAbort(comm_);
    }
    std::deque<Flight> flights;
    flights.swap(flights_);
    last_.reset();
    for (auto& flight : flights) {
      for (auto& r : flight.requests) {
        r.done(std::make_exception_ptr(DistError(describe(r.meta) + ": " + why)));
      }
    }
  }

 private:
  struct Flight {
    std::vector<Request> requests;
    std::shared_ptr<Event> finished;  // recorded after the batch's NCCL calls
    Clock::time_point launched;
  };

  // Waits for the communicator's background work (its creation, a launch still connecting,
  // finalize) until `deadline`: returns its state, ncclSuccess once done; *late when the
  // deadline came first (the state is then ncclInProgress). Sleeps grow from 1 us to 1 ms.
  ncclResult_t settle(Clock::time_point deadline, bool* late) {
    auto pause = std::chrono::microseconds(1);
    for (;;) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t result = ncclCommGetAsyncError(comm_, &state);
      if (result != ncclSuccess) return result;
      if (state != ncclInProgress) return state;
      if (Clock::now() >= deadline) {
        *late = true;
        return state;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }

  std::string seconds_text() const {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", timeout_s_);
    return text;
  }

  // " (<NCCL's last error>)", or "" when it has none.
  static std::string last_error(ncclComm_t comm) {
    const char* detail = ncclGetLastError(comm);
    return detail != nullptr && *detail != '\0' ? std::string(" (") + detail + ")" : "";
  }

  // "dist: creating the NCCL communicator on <device> (rank <r>, timeout <t> s) failed: <why>":
  // what a user needs to find the rank that is stuck and the setting that bounds the wait.
  std::string bootstrap_failure(const std::string& why) const {
    return "dist: creating the NCCL communicator on " + to_string(device_) + " (rank " +
           std::to_string(rank_) + ", timeout " + seconds_text() +
           " s: Options::timeout_s, WEFT_DIST_TIMEOUT) failed: " + why;
  }

  [[noreturn]] void fail(const std::string& why) {
    abort(why);
    throw DistError(why);
  }

  void enqueue(const Request& r, const Stream& stream) {
    const Meta& m = r.meta;
    auto s = static_cast<cudaStream_t>(stream.handle);
    ncclDataType_t type;
    if (!nccl_type(m.dtype, &type)) {
      throw DistError("dist: " + describe(m) + ": NCCL has no " + dtype_name(m.dtype) + " type");
    }
    const size_t element = dtype_size(m.dtype);
    const std::string what = describe(m);
    switch (m.kind) {
      case Kind::kAllreduce:
        check_nccl(ncclAllReduce(r.in, r.out, r.in_bytes / element, type, nccl_op(m.op), comm_, s),
                   "ncclAllReduce", what, comm_);
        return;
      case Kind::kBroadcast:
        check_nccl(ncclBroadcast(r.out, r.out, r.out_bytes, ncclUint8, m.root, comm_, s),
                   "ncclBroadcast", what, comm_);
        return;
      case Kind::kAllgather:
        check_nccl(ncclAllGather(r.in, r.out, r.in_bytes, ncclUint8, comm_, s), "ncclAllGather",
                   what, comm_);
        return;
      case Kind::kReduceScatter:
        check_nccl(
            ncclReduceScatter(r.in, r.out, r.out_bytes / element, type, nccl_op(m.op), comm_, s),
            "ncclReduceScatter", what, comm_);
        return;
      case Kind::kBarrier:
        break;
    }
    throw InternalError("dist: " + what + " reached NCCL");
  }

  Device device_;
  DeviceAPI* api_;
  Clock::duration timeout_;
  double timeout_s_;
  int rank_;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  std::string abort_reason_;
  std::deque<Flight> flights_;
  std::shared_ptr<Event> last_;  // the previous launch's event
  void* last_stream_ = nullptr;
};

}  // namespace

bool nccl_supports(DType dtype) {
  ncclDataType_t type;
  return nccl_type(dtype, &type);
}

std::unique_ptr<GpuCollectives> make_nccl_collectives(Transport& transport, Device device,
                                                      double timeout_s) {
  return std::make_unique<NcclCollectives>(transport, device, timeout_s);
}

#endif  // WEFT_USE_NCCL

}  // namespace weft::dist::detail
