// The C side of the ffi benchmark (see ffi_capi_side.h): C ABI calls only.
#include "bench/ffi/ffi_capi_side.h"

#include <chrono>
#include <thread>

namespace weft::bench::ffi {

const char* pattern_name(Pattern pattern) {
  return pattern == Pattern::kChain ? "chain" : "independent";
}

void check_rc(int rc, const char* what) {
  if (rc != 0) throw std::runtime_error(std::string(what) + " failed: " + weft_last_error());
}

// ---- WorkerGate -----------------------------------------------------------------------------

WorkerGate::WorkerGate(int workers) : workers_(workers), vars_(static_cast<size_t>(workers)) {
  for (weft_var_t& v : vars_) check_rc(weft_var_new(&v), "weft_var_new");
}

WorkerGate::~WorkerGate() {
  release();
  weft_wait_all();
  for (weft_var_t v : vars_) weft_var_delete(v);
}

int WorkerGate::block(const weft_run_context_t* /*ctx*/, void* user) {
  auto* state = static_cast<State*>(user);
  // release: pairs with hold()'s acquire load, which only counts the started operations.
  state->started.fetch_add(1, std::memory_order_release);
  // Sleeps rather than spins: the pushing thread needs the core (2-core machines).
  while (!state->open.load(std::memory_order_acquire)) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return 0;
}

bool WorkerGate::hold() {
  // relaxed: no operation of the gate runs now (release() and weft_wait_all ended the last
  // hold, or none was pushed); the pushes below publish the store to the workers.
  state_.started.store(0, std::memory_order_relaxed);
  state_.open.store(false, std::memory_order_release);
  for (const weft_var_t& v : vars_) {
    check_rc(weft_push_sync(&block, &state_, nullptr, weft_device_t{1, 0}, nullptr, 0, &v, 1, 0,
                            "ffi_bench_hold"),
             "weft_push_sync (hold)");
  }
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(5);
  while (state_.started.load(std::memory_order_acquire) < workers_) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

void WorkerGate::release() { state_.open.store(true, std::memory_order_release); }

// ---- CapiPusher -----------------------------------------------------------------------------

CapiPusher::CapiPusher(int64_t ops) : independent_(static_cast<size_t>(ops)) {
  check_rc(weft_var_new(&chain_), "weft_var_new");
  for (weft_var_t& v : independent_) check_rc(weft_var_new(&v), "weft_var_new");
}

CapiPusher::~CapiPusher() {
  weft_wait_all();
  weft_var_delete(chain_);
  for (weft_var_t v : independent_) weft_var_delete(v);
}

void CapiPusher::wait_all() { check_rc(weft_wait_all(), "weft_wait_all"); }

int CapiPusher::noop(const weft_run_context_t* /*ctx*/, void* /*user*/) { return 0; }

// ---- DLPack ---------------------------------------------------------------------------------

namespace {

// A tensor made by a foreign producer over static memory; its deleter only counts.
struct ForeignTensor {
  float data[16] = {};
  int64_t shape[1] = {16};
  DLManagedTensor managed{};
  std::atomic<int64_t> deleted{0};  // the deleter may run on an engine worker
  ForeignTensor() {
    DLTensor& t = managed.dl_tensor;
    t.data = data;
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = DLDataType{kDLFloat, 32, 1};
    t.shape = shape;
    t.strides = nullptr;
    t.byte_offset = 0;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) {
      // relaxed: a count, read after weft_wait_all (which orders it before the read).
      static_cast<ForeignTensor*>(self->manager_ctx)
          ->deleted.fetch_add(1, std::memory_order_relaxed);
    };
  }
};

double per_trip(Clock::time_point start, int64_t trips) {
  return elapsed_ns(start, Clock::now()) / static_cast<double>(trips);
}

}  // namespace

DlpackTimes time_dlpack(int64_t trips) {
  const float host[16] = {};
  const int64_t shape[1] = {16};
  weft_array_t array = nullptr;
  check_rc(
      weft_array_from_host(host, sizeof host, shape, 1, WEFT_FLOAT32, weft_device_t{1, 0}, &array),
      "weft_array_from_host");
  check_rc(weft_array_wait_to_read(array), "weft_array_wait_to_read");
  DlpackTimes times;

  Clock::time_point start = Clock::now();
  for (int64_t i = 0; i < trips; ++i) {
    DLManagedTensor* t = nullptr;
    weft_array_t back = nullptr;
    check_rc(weft_array_to_dlpack(array, &t), "weft_array_to_dlpack");
    check_rc(weft_array_from_dlpack(t, &back), "weft_array_from_dlpack");
    check_rc(weft_array_free(back), "weft_array_free");
  }
  times.roundtrip_ns = per_trip(start, trips);

  start = Clock::now();
  for (int64_t i = 0; i < trips; ++i) {
    DLManagedTensorVersioned* t = nullptr;
    weft_array_t back = nullptr;
    check_rc(weft_array_to_dlpack_versioned(array, &t), "weft_array_to_dlpack_versioned");
    check_rc(weft_array_from_dlpack_versioned(t, &back), "weft_array_from_dlpack_versioned");
    check_rc(weft_array_free(back), "weft_array_free");
  }
  times.roundtrip_versioned_ns = per_trip(start, trips);

  start = Clock::now();
  for (int64_t i = 0; i < trips; ++i) {
    DLManagedTensor* t = nullptr;
    check_rc(weft_array_to_dlpack(array, &t), "weft_array_to_dlpack");
    t->deleter(t);
  }
  times.export_ns = per_trip(start, trips);

  ForeignTensor foreign;
  start = Clock::now();
  for (int64_t i = 0; i < trips; ++i) {
    weft_array_t imported = nullptr;
    check_rc(weft_array_from_dlpack(&foreign.managed, &imported), "weft_array_from_dlpack");
    check_rc(weft_array_free(imported), "weft_array_free");
  }
  times.import_ns = per_trip(start, trips);
  // The storage (and so the deleter call) may be released after the free returns.
  check_rc(weft_wait_all(), "weft_wait_all");
  if (const int64_t deleted = foreign.deleted.load(); deleted != trips) {
    throw std::runtime_error("DLPack import: the producer's deleter ran " +
                             std::to_string(deleted) + " times for " + std::to_string(trips) +
                             " imports");
  }
  check_rc(weft_array_free(array), "weft_array_free");
  return times;
}

std::string describe_library() {
  return std::string("weft ") + weft_version() + ", C ABI " + std::to_string(weft_abi_version());
}

}  // namespace weft::bench::ffi
