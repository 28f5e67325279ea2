// The MPI transport: Open MPI (or any MPI-3 library) with MPI_THREAD_MULTIPLE. Two duplicated
// communicators keep the coordinator's control messages apart from the data collectives, and both
// return errors instead of aborting, so a transport failure becomes a DistError.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "base/build_config.h"
#include "dist/transport.h"

#if WEFT_USE_MPI
// The C API only: the C++ bindings are deprecated and need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace weft::dist::detail {

#if !WEFT_USE_MPI

bool have_mpi() { return false; }

std::unique_ptr<Transport> make_mpi_transport() {
  throw NotImplemented(
      "weft was built without MPI (configure found no MPI; Debian: apt-get install "
      "libopenmpi-dev), so it cannot join a process group of more than one process");
}

#else

bool have_mpi() { return true; }

namespace {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

void check_mpi(int code, const char* what) {
  if (code != MPI_SUCCESS) {
    throw DistError(std::string("dist: ") + what + " failed: " + mpi_error_string(code));
  }
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kFloat64:
      return MPI_DOUBLE;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kInt8:
      return MPI_INT8_T;
    case DType::kUInt8:
      return MPI_UINT8_T;
    case DType::kInt16:
      return MPI_INT16_T;
    case DType::kUInt16:
      return MPI_UINT16_T;
    case DType::kUInt32:
      return MPI_UINT32_T;
    case DType::kUInt64:
      return MPI_UINT64_T;
    case DType::kBool:
      return MPI_C_BOOL;
    default:
      throw NotImplemented(std::string("dist: reductions of ") + dtype_name(dtype) +
                           " arrays are not supported over MPI (float32, float64 and the integer "
                           "types are)");
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kProd:
      return MPI_PROD;
    case ReduceOp::kMean:
      break;
  }
  throw InternalError("dist: kMean reaches the transport");
}

// Counts above INT_MAX would need derived datatypes; a 2 GiB-element collective is refused.
int checked_count(size_t count, const char* what) {
  if (count > static_cast<size_t>(std::numeric_limits<int>::max())) {
    throw NotImplemented(std::string("dist: ") + what + " of more than 2^31-1 elements");
  }
  return static_cast<int>(count);
}

constexpr int kControlTag = 7;

class MpiTransport final : public Transport {
 public:
  MpiTransport() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided),
                "MPI_Init_thread");
      owns_mpi_ = true;
      // Only the coordination thread calls MPI, so FUNNELED would do; SERIALIZED is what we need
      // when the user's code calls MPI too.
      if (provided < MPI_THREAD_SERIALIZED) {
        throw DistError("dist: the MPI library gives thread level " + std::to_string(provided) +
                        "; weft needs MPI_THREAD_SERIALIZED or better");
      }
    }
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &control_), "MPI_Comm_dup");
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &data_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(data_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(control_, &rank_);
    MPI_Comm_size(control_, &size_);
    MPI_Comm local;
    check_mpi(MPI_Comm_split_type(control_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
              "MPI_Comm_split_type");
    MPI_Comm_rank(local, &local_rank_);
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    MPI_Get_library_version(version, &length);
    std::string v(version, static_cast<size_t>(length));
    name_ = "mpi (" + v.substr(0, v.find(',')) + ")";
  }

  ~MpiTransport() override {
    // A broadcast given up by broadcast_until may still complete into its buffer.
    for (auto& a : abandoned_) static_cast<void>(a.buffer.release());
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string name() const override { return name_; }

  void send(int dst, std::string message) override {
    reap_sends(false);
    sends_.push_back(Pending{std::move(message), MPI_REQUEST_NULL});
    Pending& p = sends_.back();
    check_mpi(MPI_Isend(p.buffer.data(), checked_count(p.buffer.size(), "a control message"),
                        MPI_BYTE, dst, kControlTag, control_, &p.request),
              "MPI_Isend (control)");
  }

  bool try_recv(int src, std::string* message) override {
    int flag = 0;
    MPI_Message handle;
    MPI_Status status;
    check_mpi(MPI_Improbe(src, kControlTag, control_, &flag, &handle, &status), "MPI_Improbe");
    if (!flag) return false;
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    message->resize(static_cast<size_t>(bytes));
    check_mpi(MPI_Mrecv(message->data(), bytes, MPI_BYTE, &handle, MPI_STATUS_IGNORE), "MPI_Mrecv");
    return true;
  }

  void allreduce(void* buffer, size_t count, DType dtype, ReduceOp op) override {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, buffer, checked_count(count, "allreduce"),
                            mpi_type(dtype), mpi_op(op), data_),
              "MPI_Allreduce");
  }
  void broadcast(void* buffer, size_t bytes, int root) override {
    check_mpi(MPI_Bcast(buffer, checked_count(bytes, "broadcast"), MPI_BYTE, root, data_),
              "MPI_Bcast");
  }
  void allgather(const void* in, void* out, size_t bytes_per_rank) override {
    int n = checked_count(bytes_per_rank, "allgather");
    check_mpi(MPI_Allgather(in, n, MPI_BYTE, out, n, MPI_BYTE, data_), "MPI_Allgather");
  }
  void reduce_scatter(const void* in, void* out, size_t count_per_rank, DType dtype,
                      ReduceOp op) override {
    check_mpi(MPI_Reduce_scatter_block(in, out, checked_count(count_per_rank, "reduce_scatter"),
                                       mpi_type(dtype), mpi_op(op), data_),
              "MPI_Reduce_scatter_block");
  }
  void barrier() override { check_mpi(MPI_Barrier(data_), "MPI_Barrier"); }

  bool broadcast_until(void* buffer, size_t bytes, int root,
                       std::chrono::steady_clock::time_point deadline) override {
    // MPI_Ibcast polled with MPI_Test (which also drives Open MPI's progress), into a buffer of
    // its own: a request of a non-blocking collective can be neither cancelled nor freed before
    // it completes (MPI 3.1, 5.12), so one given up must keep a buffer MPI may still write to.
    auto own = std::make_unique<char[]>(bytes);
    std::memcpy(own.get(), buffer, bytes);
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(
        MPI_Ibcast(own.get(), checked_count(bytes, "broadcast"), MPI_BYTE, root, data_, &request),
        "MPI_Ibcast");
    auto pause = std::chrono::microseconds(1);
    for (;;) {
      int done = 0;
      check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test (MPI_Ibcast)");
      if (done) {
        std::memcpy(buffer, own.get(), bytes);
        return true;
      }
      if (std::chrono::steady_clock::now() >= deadline) break;
      // A peer is normally microseconds behind; back off to 1 ms for one that is seconds behind.
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
    // Given up: the request and its buffer are left to MPI for the rest of the process (the
    // group is failed, so the data communicator is not used again and MPI_Finalize is skipped).
    // This leaks `bytes` once per failed group, which is the price of not blocking.
    abandoned_.push_back(Abandoned{request, std::move(own)});
    return false;
  }

  void finalize() override {
    reap_sends(true);
    MPI_Comm_free(&control_);
    MPI_Comm_free(&data_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_mpi_ && !finalized) MPI_Finalize();
  }

 private:
  struct Pending {
    std::string buffer;
    MPI_Request request;
  };
  // Completed sends give their buffers back; at finalize, sends to a rank that never received
  // them (a dead peer) are cancelled rather than waited for.
  void reap_sends(bool final) {
    while (!sends_.empty()) {
      int done = 0;
      MPI_Test(&sends_.front().request, &done, MPI_STATUS_IGNORE);
      if (!done) {
        if (!final) return;
        MPI_Cancel(&sends_.front().request);
        MPI_Request_free(&sends_.front().request);
      }
      sends_.pop_front();
    }
  }

  struct Abandoned {
    MPI_Request request;
    std::unique_ptr<char[]> buffer;
  };

  MPI_Comm control_ = MPI_COMM_NULL;
  MPI_Comm data_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  bool owns_mpi_ = false;
  std::string name_;
  std::deque<Pending> sends_;
  // Broadcasts given up by broadcast_until. Their buffers are released, never freed, when the
  // transport goes: MPI may complete the request after that.
  std::vector<Abandoned> abandoned_;
};

}  // namespace

std::unique_ptr<Transport> make_mpi_transport() { return std::make_unique<MpiTransport>(); }

#endif  // WEFT_USE_MPI

namespace {

class SingleTransport final : public Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string name() const override { return "single process"; }
  void send(int, std::string) override { throw InternalError("dist: send in a group of one"); }
  bool try_recv(int, std::string*) override { return false; }
  void allreduce(void*, size_t, DType, ReduceOp) override {}
  void broadcast(void*, size_t, int) override {}
  void allgather(const void* in, void* out, size_t bytes) override {
    if (in != out) std::memmove(out, in, bytes);
  }
  void reduce_scatter(const void* in, void* out, size_t count, DType dtype, ReduceOp) override {
    if (in != out) std::memmove(out, in, count * dtype_size(dtype));
  }
  void barrier() override {}
  bool broadcast_until(void*, size_t, int, std::chrono::steady_clock::time_point) override {
    return true;
  }
  void finalize() override {}
};

}  // namespace

std::unique_ptr<Transport> make_single_transport() { return std::make_unique<SingleTransport>(); }

}  // namespace weft::dist::detail
