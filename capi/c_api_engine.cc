// The C ABI: errors, versions, conversions, and the engine (variables, pushes, completions).
#include <new>
#include <span>
#include <utility>

#include "base/build_config.h"
#include "capi/c_api_internal.h"
#include "ndarray/runtime.h"

namespace weft::capi {
namespace {
thread_local std::string t_last_error;
}  // namespace

constinit thread_local const weft_run_context_t* t_current_context = nullptr;

int set_last_error(std::string message) {
  t_last_error = std::move(message);
  return -1;
}

int fail(const char* function) {
  try {
    throw;
  } catch (const std::exception& e) {
    return set_last_error(std::string(function) + ": " + e.what());
  } catch (...) {
    return set_last_error(std::string(function) + ": unknown exception");
  }
}

std::string take_foreign_error() { return std::exchange(t_last_error, std::string()); }

Device to_device_checked(weft_device_t device) {
  WEFT_CHECK_AS(ValueError, device.type == static_cast<int32_t>(DeviceType::kCPU) ||
                                device.type == static_cast<int32_t>(DeviceType::kCUDA))
      << "device type " << device.type << " is not supported (1 = CPU, 2 = CUDA)";
  WEFT_CHECK_AS(ValueError, device.id >= 0 && device.id < 1024)
      << "device ordinal " << device.id << " is out of range";
  WEFT_CHECK_AS(ValueError, device.type != static_cast<int32_t>(DeviceType::kCPU) || device.id == 0)
      << "the CPU device has ordinal 0, not " << device.id;
  return Device{static_cast<DeviceType>(device.type), device.id};
}

weft_device_t from_device(Device device) {
  return weft_device_t{static_cast<int32_t>(device.type), device.id};
}

DType to_dtype(int code) {
  WEFT_CHECK_AS(ValueError, code >= WEFT_FLOAT32 && code <= WEFT_BFLOAT16)
      << "dtype code " << code << " is not a weft dtype (0 float32, 1 float64, 2 float16, "
      << "3 uint8, 4 int32, 5 int8, 6 int64, 7 bool, 8 int16, 9 uint16, 10 uint32, 11 uint64, "
      << "12 bfloat16)";
  return static_cast<DType>(code);
}

Shape to_shape(const int64_t* dims, int ndim, const char* argument) {
  WEFT_CHECK_AS(ValueError, ndim >= 0 && ndim <= 32)
      << "argument '" << argument << "': ndim " << ndim << " is out of range (0 to 32)";
  WEFT_CHECK_AS(ValueError, ndim == 0 || dims != nullptr)
      << "argument '" << argument << "' is NULL with ndim " << ndim;
  Shape s(dims, dims + ndim);
  for (int i = 0; i < ndim; ++i) {
    WEFT_CHECK_AS(ShapeError, dims[i] >= 0)
        << "argument '" << argument << "': dimension " << i << " is " << dims[i];
  }
  (void)s.size();  // checked product: throws ShapeError past kMaxElements
  return s;
}

namespace {

VarHandle checked_var(weft_var_t v, const char* argument) {
  VarHandle h = to_var(v);
  WEFT_CHECK_AS(ValueError, static_cast<bool>(h)) << "argument '" << argument << "' is a null var";
  return h;
}

[[noreturn]] [[gnu::cold]] void throw_bad_var_list(const weft_var_t* vars, size_t n,
                                                   const char* argument) {
  WEFT_CHECK_AS(ValueError, vars != nullptr)
      << "argument '" << argument << "' is NULL with " << n << " entries";
  WEFT_CHECK_AS(ValueError, n <= (size_t{1} << 20))
      << "argument '" << argument << "': " << n << " variables is too many";
  for (size_t i = 0; i < n; ++i) {
    WEFT_CHECK_AS(ValueError, vars[i].opaque[0] != 0)
        << "argument '" << argument << "': entry " << i << " is a null var";
  }
  WEFT_THROW(InternalError) << "argument '" << argument << "': rejected without a reason";
}

// A C list of variables as VarHandles: copied into a stack buffer for short lists (a push
// allocates nothing here), checked for NULL lists and null entries (the throw is out of line).
class VarBuffer {
 public:
  VarBuffer(const weft_var_t* vars, size_t n, const char* argument) : size_(n) {
    if (n == 0) return;
    bool ok = vars != nullptr && n <= (size_t{1} << 20);
    for (size_t i = 0; ok && i < n; ++i) ok = vars[i].opaque[0] != 0;
    if (!ok) throw_bad_var_list(vars, n, argument);
    if (n <= kInline) {
      std::memcpy(static_cast<void*>(inline_), vars, n * sizeof(VarHandle));
      data_ = std::launder(reinterpret_cast<const VarHandle*>(inline_));
    } else {
      heap_.resize(n);
      std::memcpy(static_cast<void*>(heap_.data()), vars, n * sizeof(VarHandle));
      data_ = heap_.data();
    }
  }
  std::span<const VarHandle> span() const { return {data_, size_}; }

 private:
  static constexpr size_t kInline = 4;
  alignas(VarHandle) unsigned char inline_[kInline * sizeof(VarHandle)];
  std::vector<VarHandle> heap_;
  const VarHandle* data_ = nullptr;
  size_t size_ = 0;
};

// Owns a foreign function's user data: frees it once, when the operation is destroyed.
struct UserData {
  void* user = nullptr;
  weft_free_fn free_user = nullptr;
  UserData(void* u, weft_free_fn f) : user(u), free_user(f) {}
  UserData(UserData&& o) noexcept : user(o.user), free_user(std::exchange(o.free_user, nullptr)) {}
  UserData(const UserData&) = delete;
  UserData& operator=(const UserData&) = delete;
  UserData& operator=(UserData&&) = delete;
  ~UserData() {
    if (free_user != nullptr) free_user(user);
  }
};

// Error of a foreign function that returned non-zero.
[[noreturn]] void throw_foreign(const char* kind, int rc) {
  std::string msg = take_foreign_error();
  if (msg.empty()) msg = "returned " + std::to_string(rc) + " without weft_set_error";
  WEFT_THROW(Error) << kind << " failed: " << msg;
}

}  // namespace
}  // namespace weft::capi

using namespace weft;        // NOLINT(google-build-using-namespace)
using namespace weft::capi;  // NOLINT(google-build-using-namespace)

extern "C" {

const char* weft_last_error(void) { return t_last_error.c_str(); }

int weft_set_error(const char* message) {
  return set_last_error(message != nullptr ? message : "(no message)");
}

const char* weft_version(void) { return WEFT_VERSION_STRING; }
uint32_t weft_abi_version(void) { return WEFT_C_ABI_VERSION; }

int weft_var_new(weft_var_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = from_var(Runtime::get().engine().new_var());
  WEFT_C_END("weft_var_new")
}

int weft_var_delete(weft_var_t var) {
  WEFT_C_BEGIN
  Runtime::get().engine().delete_var(checked_var(var, "var"));
  WEFT_C_END("weft_var_delete")
}

int weft_var_version(weft_var_t var, uint64_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = Runtime::get().engine().var_version(checked_var(var, "var"));
  WEFT_C_END("weft_var_version")
}

int weft_push_sync(weft_sync_fn fn, void* user, weft_free_fn free_user, weft_device_t device,
                   const weft_var_t* reads, size_t num_reads, const weft_var_t* writes,
                   size_t num_writes, int priority, const char* name) {
  UserData data(user, free_user);  // freed here when the push fails
  WEFT_C_BEGIN
  WEFT_CHECK_AS(ValueError, fn != nullptr) << "argument 'fn' is NULL";
  const Device dev = to_device(device);
  const std::string_view op_name = name != nullptr ? std::string_view(name) : std::string_view();
  const VarBuffer r(reads, num_reads, "reads");
  const VarBuffer w(writes, num_writes, "writes");
  Engine& engine = Runtime::get().engine();
  if (free_user == nullptr) {
    // Nothing to free: a closure of two plain pointers, trivially moved.
    engine.push_sync(
        [fn, user](const RunContext& rc) {
          const weft_run_context_t ctx = from_run_context(rc);
          CurrentContextScope scope(&ctx);
          const int rc_fn = fn(&ctx, user);
          if (rc_fn != 0) throw_foreign("foreign operation", rc_fn);
        },
        dev, r.span(), w.span(), FnProperty::kNormal, priority, op_name);
    return 0;
  }
  engine.push_sync(
      [fn, data = std::move(data)](const RunContext& rc) {
        const weft_run_context_t ctx = from_run_context(rc);
        CurrentContextScope scope(&ctx);
        const int rc_fn = fn(&ctx, data.user);
        if (rc_fn != 0) throw_foreign("foreign operation", rc_fn);
      },
      dev, r.span(), w.span(), FnProperty::kNormal, priority, op_name);
  WEFT_C_END("weft_push_sync")
}

int weft_push_async(weft_async_fn fn, void* user, weft_free_fn free_user, weft_device_t device,
                    const weft_var_t* reads, size_t num_reads, const weft_var_t* writes,
                    size_t num_writes, int priority, const char* name) {
  UserData data(user, free_user);
  WEFT_C_BEGIN
  WEFT_CHECK_AS(ValueError, fn != nullptr) << "argument 'fn' is NULL";
  const Device dev = to_device(device);
  const std::string_view op_name = name != nullptr ? std::string_view(name) : std::string_view();
  const VarBuffer r(reads, num_reads, "reads");
  const VarBuffer w(writes, num_writes, "writes");
  Runtime::get().engine().push_async(
      [fn, data = std::move(data)](const RunContext& rc, CallbackOnComplete done) {
        const weft_run_context_t ctx = from_run_context(rc);
        CurrentContextScope scope(&ctx);
        fn(&ctx, from_completion(done), data.user);
      },
      dev, r.span(), w.span(), FnProperty::kNormal, priority, op_name);
  WEFT_C_END("weft_push_async")
}

int weft_complete(weft_completion_t done, const char* error) {
  WEFT_C_BEGIN
  CallbackOnComplete cb = to_completion(done);
  if (error == nullptr) {
    cb();
  } else {
    cb(std::make_exception_ptr(Error(std::string("asynchronous operation failed: ") + error)));
  }
  WEFT_C_END("weft_complete")
}

int weft_wait_var(weft_var_t var) {
  WEFT_C_BEGIN
  Runtime::get().engine().wait_for_var(checked_var(var, "var"));
  WEFT_C_END("weft_wait_var")
}

int weft_wait_all(void) {
  WEFT_C_BEGIN
  Runtime::get().engine().wait_for_all();
  WEFT_C_END("weft_wait_all")
}

int weft_current_context(weft_run_context_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  WEFT_CHECK(t_current_context != nullptr)
      << "no foreign operation is running on this thread (call it from inside one)";
  *out = *t_current_context;
  WEFT_C_END("weft_current_context")
}

}  // extern "C"
