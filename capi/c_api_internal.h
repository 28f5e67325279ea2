// Internals shared by the C ABI's translation units: the error boundary, handle tables and the
// conversions between C values and weft's types. Nothing here is part of the ABI.
#pragma once

#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "capi/handle_table.h"
#include "engine/engine.h"
#include "graph/executor.h"
#include "graph/graph.h"
#include "ndarray/ndarray.h"
#include "weft/c_api.h"

namespace weft::capi {

/// Records `message` as this thread's last error; returns -1.
int set_last_error(std::string message);
/// The error boundary: records the exception in flight, prefixed with the entry point's name.
int fail(const char* function);

// Every entry point's body runs inside WEFT_C_BEGIN / WEFT_C_END(name): no exception leaves it.
#define WEFT_C_BEGIN try {
#define WEFT_C_END(function)             \
  }                                      \
  catch (...) {                          \
    return ::weft::capi::fail(function); \
  }                                      \
  return 0;

/// Throws ValueError naming the argument when `p` is null.
template <typename T>
inline void require(const T* p, const char* argument) {
  WEFT_CHECK_AS(ValueError, p != nullptr) << "argument '" << argument << "' is NULL";
}

}  // namespace weft::capi

// The objects behind the opaque handle types of c_api.h. A handle is a token naming one of them
// in a HandleTable, never its address (Note [Generation-checked handles]).
struct weft_array_s {
  weft::NDArray array;
};
struct weft_graph_s {
  std::shared_ptr<const weft::graph::Graph> graph;
};
struct weft_executor_s {
  std::unique_ptr<weft::graph::Executor> exec;
  std::vector<weft::NDArray> outputs;  // handles to hand out
};
// The attributes of one application of a foreign operator, during a callback.
struct weft_attrs_s {
  const weft::OpAttrs* attrs = nullptr;
};

namespace weft::capi {

static_assert(sizeof(void*) == sizeof(uint64_t), "handle tokens need 64-bit pointers");

/// The live handles of each kind (defined in c_api_array.cc and c_api_graph.cc).
extern HandleTable<weft_array_s> g_array_handles;
extern HandleTable<weft_graph_s> g_graph_handles;
extern HandleTable<weft_executor_s> g_executor_handles;

inline uint64_t token_of(const void* handle) { return reinterpret_cast<uintptr_t>(handle); }
template <typename S>
S* handle_of(uint64_t token) {
  return reinterpret_cast<S*>(static_cast<uintptr_t>(token));
}

/// Throws ValueError: `handle` (not NULL) is not a live handle of `table`'s kind.
template <typename S>
[[noreturn]] void throw_not_live(const HandleTable<S>& table, const S* handle, const char* kind,
                                 const char* argument) {
  const uint64_t token = token_of(handle);
  WEFT_THROW(ValueError) << "argument '" << argument << "' (handle "
                         << HandleTable<S>::token_text(token) << ") is not a live weft " << kind
                         << " handle: " << table.why_not_live(token);
}

/// The object behind `handle` after checking it is not NULL and is a live handle of the table's
/// kind; ValueError naming the argument, the handle and why otherwise.
template <typename S>
S& checked_handle(const HandleTable<S>& table, S* handle, const char* kind, const char* argument) {
  WEFT_CHECK_AS(ValueError, handle != nullptr) << "argument '" << argument << "' is NULL";
  S* object = table.find(token_of(handle));
  if (__builtin_expect(object == nullptr, 0)) throw_not_live(table, handle, kind, argument);
  return *object;
}
/// Frees a live handle (NULL is accepted and does nothing); ValueError naming the handle when it
/// is not live (freed already, another kind, not a handle). The object is destroyed here.
template <typename S>
void free_handle(HandleTable<S>& table, S* handle, const char* kind, const char* argument) {
  if (handle == nullptr) return;
  std::unique_ptr<S> object = table.erase(token_of(handle));
  if (!object) throw_not_live(table, handle, kind, argument);
}
/// A new handle of `table`'s kind owning `object`.
template <typename S>
S* make_handle(HandleTable<S>& table, std::unique_ptr<S> object) {
  return handle_of<S>(table.insert(std::move(object)));
}

inline weft_array_s& array_of(weft_array_t handle, const char* argument) {
  return checked_handle(g_array_handles, handle, "array", argument);
}
inline weft_graph_s& graph_of(weft_graph_t handle, const char* argument) {
  return checked_handle(g_graph_handles, handle, "graph", argument);
}
inline weft_executor_s& executor_of(weft_executor_t handle, const char* argument) {
  return checked_handle(g_executor_handles, handle, "executor", argument);
}
/// A new handle owning a reference to `array`.
weft_array_t new_array_handle(NDArray array);

/// Checks a device; the CPU takes an inlined fast path (it is on every push).
Device to_device_checked(weft_device_t device);
inline Device to_device(weft_device_t device) {
  if (device.type == static_cast<int32_t>(DeviceType::kCPU) && device.id == 0) return Device::cpu();
  return to_device_checked(device);
}
weft_device_t from_device(Device device);
DType to_dtype(int code);
Shape to_shape(const int64_t* dims, int ndim, const char* argument);

static_assert(sizeof(VarHandle) == sizeof(weft_var_t), "weft_var_t must hold a VarHandle");
static_assert(std::is_trivially_copyable_v<VarHandle>);
inline VarHandle to_var(weft_var_t v) {
  VarHandle h;
  std::memcpy(static_cast<void*>(&h), &v, sizeof h);
  return h;
}
inline weft_var_t from_var(VarHandle h) {
  weft_var_t v;
  std::memcpy(&v, &h, sizeof v);
  return v;
}
static_assert(sizeof(CallbackOnComplete) == sizeof(weft_completion_t),
              "weft_completion_t must hold a CallbackOnComplete");
static_assert(std::is_trivially_copyable_v<CallbackOnComplete>);
inline CallbackOnComplete to_completion(weft_completion_t c) {
  CallbackOnComplete cb;
  std::memcpy(static_cast<void*>(&cb), &c, sizeof cb);
  return cb;
}
inline weft_completion_t from_completion(const CallbackOnComplete& cb) {
  weft_completion_t c;
  std::memcpy(&c, static_cast<const void*>(&cb), sizeof c);
  return c;
}
inline weft_run_context_t from_run_context(const RunContext& rc) {
  return weft_run_context_t{
      {static_cast<int32_t>(rc.device.type), rc.device.id}, rc.stream.handle, rc.worker};
}

/// The context of the foreign operation running on this thread (null when none).
extern constinit thread_local const weft_run_context_t* t_current_context;

/// Marks the operation running on this thread, for weft_current_context (a scope). Inline: it
/// is on every foreign operation's path.
class CurrentContextScope {
 public:
  explicit CurrentContextScope(const weft_run_context_t* ctx) : previous_(t_current_context) {
    t_current_context = ctx;
  }
  ~CurrentContextScope() { t_current_context = previous_; }
  CurrentContextScope(const CurrentContextScope&) = delete;
  CurrentContextScope& operator=(const CurrentContextScope&) = delete;

 private:
  const weft_run_context_t* previous_;
};

/// Takes this thread's last error for a failing foreign callback ("" resets it).
std::string take_foreign_error();

}  // namespace weft::capi
