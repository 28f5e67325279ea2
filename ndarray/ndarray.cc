// NDArray storage, views, host transfers and operator invocation onto the engine.
#include "ndarray/ndarray.h"

#include <cstring>
#include <sstream>

#include "base/profiler.h"
#include "devices/device_api.h"
#include "engine/worker_pool.h"
#include "memory/allocator.h"
#include "ndarray/autograd.h"
#include "ndarray/runtime.h"

namespace weft {

namespace detail {

// Note [Recycled storage]
// A small array that dies with nothing pending on it (the result of a tiny operation that ran at
// once, overwritten by the next: `c = a + b` in a loop) would cost a delete_var, a trip of its
// memory back to the pool, then a new_var and an allocation for the next result. Instead the
// thread that drops it keeps its memory and variable for the next array of the same size: the
// engine renews the variable (Engine::renew_var: a new handle, version 0, the old handle
// refused as after delete_var) only when no operation runs or waits on it and it carries no
// error, so nothing of the old array can touch the new one. Each thread keeps a few such
// arrays of at most kMaxBytes; the engine's workers keep none (their thread-local state would
// outlive the engine they belong to). Storage of another runtime (after Runtime::reset or
// shutdown) is never reused: its memory is freed and its variable forgotten with its engine.
thread_local bool t_recycle_bin_closed = false;

class RecycleBin {
 public:
  static constexpr size_t kMaxBytes = 64 << 10;
  static constexpr int kSlots = 8;

  /// Keeps `s`'s memory and renewed variable; false when it cannot (caller deletes normally).
  bool put(Storage& s) {
    if (count_ == kSlots || detail::current_worker_index() >= 0) return false;
    VarHandle fresh = s.engine->renew_var(s.var, s.device.type == DeviceType::kCUDA);
    if (!fresh) return false;
    slots_[count_++] = Entry{std::move(s.data), fresh, s.engine, s.device, s.bytes, s.generation};
    return true;
  }

  /// Takes the memory and variable of an earlier array for `s` (bytes, device and runtime
  /// generation set); false when there is none.
  bool take(Storage& s) {
    for (int i = count_ - 1; i >= 0; --i) {
      Entry& e = slots_[i];
      if (e.bytes != s.bytes || e.device != s.device || e.generation != s.generation) continue;
      s.data = std::move(e.data);
      s.var = e.var;
      e = std::move(slots_[--count_]);
      return true;
    }
    return false;
  }

  ~RecycleBin() {
    t_recycle_bin_closed = true;  // see recycle_bin()
    for (int i = 0; i < count_; ++i) {
      Entry& e = slots_[i];
      if (Runtime::is_current(e.generation)) {
        e.engine->delete_var_on(
            e.var, e.device,
            [block = std::move(e.data)](const RunContext&) mutable { block.reset(); });
      } else {
        e.data.reset();
      }
    }
  }

 private:
  struct Entry {
    DataPtr data;
    VarHandle var;
    Engine* engine = nullptr;
    Device device;
    size_t bytes = 0;
    uint64_t generation = 0;
  };
  Entry slots_[kSlots];
  int count_ = 0;
};

// The thread's bin; null once its thread_local destructor ran: arrays destroyed by thread_local
// destructors that run later delete their variables directly (the flag lives outside the bin,
// whose own fields end their lifetime with it).
RecycleBin* recycle_bin() {
  if (t_recycle_bin_closed) return nullptr;
  thread_local RecycleBin bin;
  return &bin;
}

Storage::~Storage() {
  if (var == nullptr) return;
  if (!Runtime::alive() || generation != Runtime::get().generation()) {
    // The runtime that owned the var is gone: no operation can still be pending on it.
    data.reset();
    return;
  }
  if (recyclable && bytes <= RecycleBin::kMaxBytes) {
    RecycleBin* bin = recycle_bin();
    if (bin != nullptr && bin->put(*this)) return;
  }
  // The memory goes back to the pool only after every pending operation on the var completed
  // (on a GPU: was queued, Note [Stream-ordered frees] in engine/threaded_engine_vars.cc).
  engine->delete_var_on(var, device,
                        [block = std::move(data)](const RunContext&) mutable { block.reset(); });
}
}  // namespace detail

std::shared_ptr<detail::Storage> allocate_storage(size_t bytes, Device device) {
  Runtime& rt = Runtime::get();
  auto s = std::make_shared<detail::Storage>();
  s->engine = &rt.engine();
  s->device = device;
  s->bytes = bytes;
  s->generation = rt.generation();
  s->recyclable = true;
  // Note [Recycled storage]
  detail::RecycleBin* bin =
      bytes <= detail::RecycleBin::kMaxBytes ? detail::recycle_bin() : nullptr;
  if (bin == nullptr || !bin->take(*s)) {
    s->data = rt.allocator(device).allocate(bytes);
    s->var = s->engine->new_var();
  }
  s->id = rt.next_storage_id();
  return s;
}

// ---- construction ---------------------------------------------------------------------------

NDArray NDArray::empty(const Shape& shape, DType dtype, Device device) {
  WEFT_CHECK(shape.known()) << "NDArray::empty: shape " << shape << " is not fully known";
  // Note [Checked sizes]: a shape beyond the limits, or an array larger than the device, is an
  // error naming the shape before anything is allocated.
  static const std::string what = "NDArray::empty";
  const size_t bytes = shape_bytes(shape, dtype_size(dtype), what);
  // Every device weft runs on has more than kSurelyFits bytes: smaller arrays skip the query.
  constexpr size_t kSurelyFits = size_t{256} << 20;
  const size_t capacity = bytes < kSurelyFits ? 0 : device_memory_capacity(device);
  if (capacity != 0 && bytes > capacity) {
    WEFT_THROW(OutOfMemory) << "NDArray::empty: an array of shape " << shape << " "
                            << dtype_name(dtype) << " needs " << bytes << " bytes ("
                            << detail::format_bytes(bytes) << "), more than "
                            << weft::to_string(device) << " has in total ("
                            << detail::format_bytes(capacity) << ")";
  }
  return NDArray(allocate_storage(bytes, device), shape, dtype);
}

static AttrMap creation_attrs(const Shape& shape, DType dtype) {
  return AttrMap{{"shape", format_shape_attr(shape)}, {"dtype", dtype_name(dtype)}};
}

static NDArray create(std::string_view op, AttrMap attrs, Device device) {
  InvokeOptions o;
  o.device = device;
  return invoke(op, {}, attrs, std::move(o)).at(0);
}

// An array with a zero-length dimension has no values to fill; the creation ops read a 0 in their
// shape attribute as "unknown" (MXNet's convention), so such arrays are allocated directly.
NDArray NDArray::zeros(const Shape& shape, DType dtype, Device device) {
  if (shape.known() && shape.size() == 0) return empty(shape, dtype, device);
  return create("_zeros", creation_attrs(shape, dtype), device);
}
NDArray NDArray::ones(const Shape& shape, DType dtype, Device device) {
  if (shape.known() && shape.size() == 0) return empty(shape, dtype, device);
  return create("_ones", creation_attrs(shape, dtype), device);
}
NDArray NDArray::full(const Shape& shape, double value, DType dtype, Device device) {
  if (shape.known() && shape.size() == 0) return empty(shape, dtype, device);
  AttrMap a = creation_attrs(shape, dtype);
  a["value"] = format_float_attr(value);
  return create("_full", std::move(a), device);
}
NDArray NDArray::uniform(const Shape& shape, double low, double high, DType dtype, Device device) {
  AttrMap a = creation_attrs(shape, dtype);
  a["low"] = format_float_attr(low);
  a["high"] = format_float_attr(high);
  return create("_random_uniform", std::move(a), device);
}
NDArray NDArray::normal(const Shape& shape, double loc, double scale, DType dtype, Device device) {
  AttrMap a = creation_attrs(shape, dtype);
  a["loc"] = format_float_attr(loc);
  a["scale"] = format_float_attr(scale);
  return create("_random_normal", std::move(a), device);
}
NDArray NDArray::arange(double start, double stop, double step, DType dtype, Device device) {
  AttrMap a{{"start", format_float_attr(start)},
            {"stop", format_float_attr(stop)},
            {"step", format_float_attr(step)},
            {"dtype", dtype_name(dtype)}};
  return create("_arange", std::move(a), device);
}

NDArray NDArray::from_host(const void* data, const Shape& shape, DType dtype, Device device) {
  if (device.type == DeviceType::kCUDA) {
    // Through a CPU array: the caller's buffer may be reused as soon as this returns.
    return from_host(data, shape, dtype, Device::cpu()).copy_to(device);
  }
  WEFT_CHECK(device.type == DeviceType::kCPU || device.type == DeviceType::kCUDAHost)
      << "NDArray::from_host: cannot fill an array on '" << weft::to_string(device)
      << "' from host memory";
  NDArray a = empty(shape, dtype, device);
  // A fresh var has no pending operations: the copy can happen right here.
  if (a.nbytes() > 0) std::memcpy(a.raw_data(), data, a.nbytes());
  return a;
}

// ---- properties and views -------------------------------------------------------------------

void NDArray::check_not_none(const char* what) const {
  WEFT_CHECK(storage_ != nullptr) << "NDArray::" << what << ": the array is none (no storage)";
}

Device NDArray::device() const { return storage_ ? storage_->device : Device::cpu(); }
VarHandle NDArray::var() const {
  check_not_none("var");
  return storage_->var;
}
uint64_t NDArray::version() const {
  check_not_none("version");
  return storage_->engine->var_version(storage_->var);
}
uint64_t NDArray::storage_id() const {
  check_not_none("storage_id");
  return storage_->id;
}

NDArray NDArray::reshape(const Shape& shape) const {
  check_not_none("reshape");
  Shape s = shape;
  int unknown = -1;
  int64_t known = 1;
  for (int i = 0; i < s.ndim(); ++i) {
    if (s[i] == -1) {
      WEFT_CHECK(unknown < 0) << "NDArray::reshape: at most one -1 in " << shape;
      unknown = i;
    } else {
      WEFT_CHECK(s[i] >= 0) << "NDArray::reshape: invalid dimension in " << shape;
      known *= s[i];
    }
  }
  if (unknown >= 0) {
    WEFT_CHECK(known > 0 && size() % known == 0)
        << "NDArray::reshape: cannot reshape " << shape_ << " to " << shape;
    s[unknown] = size() / known;
  }
  WEFT_CHECK_AS(ShapeError, s.size() == size()) << "NDArray::reshape: cannot reshape " << shape_
                                                << " (" << size() << " elements) to " << shape;
  NDArray v(storage_, s, dtype_, byte_offset_);
  return v;
}

NDArray NDArray::slice(int64_t begin, int64_t end) const {
  check_not_none("slice");
  WEFT_CHECK(ndim() >= 1) << "NDArray::slice: a 0-d array cannot be sliced";
  WEFT_CHECK(0 <= begin && begin <= end && end <= shape_[0])
      << "NDArray::slice: [" << begin << ", " << end << ") is out of range for first dimension "
      << shape_[0];
  Shape s = shape_;
  s[0] = end - begin;
  const size_t row = static_cast<size_t>(shape_.prod(1, ndim())) * dtype_size(dtype_);
  return NDArray(storage_, s, dtype_, byte_offset_ + static_cast<size_t>(begin) * row);
}

NDArray NDArray::at(int64_t i) const {
  NDArray row = slice(i, i + 1);
  Shape s(shape_.begin() + 1, shape_.end());
  row.shape_ = s;
  return row;
}

TensorView NDArray::view() const {
  check_not_none("view");
  TensorView v(storage_->data.get(), storage_->device, dtype_, shape_);
  v.byte_offset = byte_offset_;
  return v;
}

void* NDArray::raw_data() const {
  check_not_none("raw_data");
  return static_cast<char*>(storage_->data.get()) + byte_offset_;
}

// ---- copies and waits -----------------------------------------------------------------------

NDArray NDArray::copy() const { return copy_to(device()); }

NDArray NDArray::copy_to(Device device) const {
  check_not_none("copy_to");
  NDArray dst = empty(shape_, dtype_, device);
  copy_to(dst);
  return dst;
}

void NDArray::copy_to(NDArray& dst) const {
  check_not_none("copy_to");
  WEFT_CHECK_AS(ShapeError, dst.shape() == shape_ && dst.dtype() == dtype_)
      << "NDArray::copy_to: destination is " << dst.shape() << " " << dtype_name(dst.dtype())
      << ", source is " << shape_ << " " << dtype_name(dtype_);
  if (dst.shares_storage_with(*this) && dst.byte_offset_ == byte_offset_) return;
  if (device().type == DeviceType::kCUDA || dst.device().type == DeviceType::kCUDA) {
    copy_across_devices(dst);
    return;
  }
  InvokeOptions o;
  o.outputs = {dst};
  invoke("_copy", {*this}, {}, std::move(o));
}

// Note [Copies between devices]: one engine operation reading the source's variable and
// writing the destination's, on the GPU side's workers: host-to-device copies on the copy-in
// stream, device-to-host on the copy-out stream, device-to-device on a compute stream of the
// destination (between two GPUs a peer copy). Event ordering (Note [GPU var events]) puts it
// behind the kernels that produce the source and before those that read the destination; a CPU
// reader of a device-to-host result runs once the copy has completed.
//
// Note [Pinned staging]: CUDA copies ordinary (pageable) host memory synchronously, staging it
// through a driver buffer, so a copy worker would wait for every large transfer and nothing
// else could be queued on its stream meanwhile. From kStageMin bytes up weft stages the
// transfer itself through a block of the pinned pool: copy-in queues a host function that copies
// the source into the block (in stream order: the source may be a staged copy-out's destination,
// filled by that copy's own host function) and an asynchronous host-to-device copy; copy-out
// queues an asynchronous device-to-host copy into the block and, behind it on the stream, a host
// function that copies the block into the destination. The block goes back to the pinned pool from
// a host function queued after the transfer (the pinned pool records no events and calls no CUDA
// function when a block is freed, which a host function must not). Readers of the destination are
// ordered behind the stream's position after all of it, host function included. Smaller copies go
// straight through CUDA's own staging, which is cheaper there than a host function's hop.
namespace {
constexpr size_t kStageMin = size_t{64} << 10;

struct StagedCopy {
  DataPtr block;
  void* dst = nullptr;         ///< copy-out: the pageable destination; copy-in: null
  const void* src = nullptr;   ///< copy-in: the pageable source
  std::shared_ptr<void> keep;  ///< the host array's storage, until the last host function
  size_t bytes = 0;
};

// Copy-in, on the stream before the transfer: the source may be the destination of a staged
// copy-out whose own host function fills it later; the stream waits for that copy's mark, the
// pushing worker does not, so the source is read here, in stream order.
void fill_staged_copy(void* arg) {
  auto* staged = static_cast<StagedCopy*>(arg);
  std::memcpy(staged->block.get(), staged->src, staged->bytes);
}

void finish_staged_copy(void* arg) {
  std::unique_ptr<StagedCopy> staged(static_cast<StagedCopy*>(arg));
  if (staged->dst != nullptr) std::memcpy(staged->dst, staged->block.get(), staged->bytes);
  // `staged` frees the block into the pinned pool here.
}
}  // namespace

void NDArray::copy_across_devices(NDArray& dst) const {
  const Device from = device(), to = dst.device();
  Device run_on = to.type == DeviceType::kCUDA ? to : from;
  FnProperty property = FnProperty::kNormal;
  if (from.type != DeviceType::kCUDA) {
    property = FnProperty::kCopyToDevice;
  } else if (to.type != DeviceType::kCUDA) {
    property = FnProperty::kCopyFromDevice;
  }
  const size_t bytes = nbytes();
  auto src_storage = storage_;
  auto dst_storage = dst.storage_;
  void* dst_ptr = dst.raw_data();
  const void* src_ptr = raw_data();
  const bool stage =
      bytes >= kStageMin && ((from.type == DeviceType::kCPU && to.type == DeviceType::kCUDA) ||
                             (from.type == DeviceType::kCUDA && to.type == DeviceType::kCPU));
  std::shared_ptr<PooledAllocator> pinned;
  if (stage) pinned = Runtime::get().shared_allocator(Device{DeviceType::kCUDAHost, 0});
  storage_->engine->push_sync(
      [src_storage, dst_storage, dst_ptr, src_ptr, bytes, from, to,
       pinned = std::move(pinned)](const RunContext& rc) {
        DeviceAPI* api = DeviceAPI::get(DeviceType::kCUDA);
        if (!pinned) {
          api->copy(dst_ptr, to, src_ptr, from, bytes, rc.stream);
          return;
        }
        const Device host{DeviceType::kCUDAHost, 0};
        auto staged = std::make_unique<StagedCopy>();
        staged->block = pinned->allocate(bytes);
        staged->bytes = bytes;
        try {
          if (from.type == DeviceType::kCPU) {  // Note [Pinned staging]: copy-in
            staged->src = src_ptr;
            staged->keep = src_storage;
            api->launch_host_func(rc.stream, &fill_staged_copy, staged.get());
            api->copy(dst_ptr, to, staged->block.get(), host, bytes, rc.stream);
          } else {  // copy-out
            staged->dst = dst_ptr;
            staged->keep = dst_storage;
            api->copy(staged->block.get(), host, src_ptr, from, bytes, rc.stream);
          }
          api->launch_host_func(rc.stream, &finish_staged_copy, staged.get());
        } catch (...) {
          // Wait here, so the block is never freed under a queued DMA or host function; if even
          // that fails (a faulted device), the block is leaked rather than freed under them.
          try {
            api->synchronize(rc.stream);
          } catch (...) {
            static_cast<void>(staged.release());
            throw;
          }
          throw;
        }
        staged.release();  // finish_staged_copy owns it now
      },
      run_on, {storage_->var}, {dst.storage_->var}, property, 0, "copy_to");
}

void NDArray::wait_to_read() const {
  check_not_none("wait_to_read");
  storage_->engine->wait_for_var(storage_->var);
}
void NDArray::wait_to_write() const { wait_to_read(); }

void NDArray::copy_to_host(void* dst, size_t bytes) const {
  check_not_none("copy_to_host");
  WEFT_CHECK(bytes == nbytes()) << "NDArray::copy_to_host: buffer has " << bytes
                                << " bytes, array has " << nbytes();
  if (device().type == DeviceType::kCUDA) {
    copy_to(Device::cpu()).copy_to_host(dst, bytes);
    return;
  }
  wait_to_read();
  if (bytes > 0) std::memcpy(dst, raw_data(), bytes);
}

std::vector<double> NDArray::to_doubles() const {
  check_not_none("to_doubles");
  if (device().type == DeviceType::kCUDA) return copy_to(Device::cpu()).to_doubles();
  wait_to_read();
  std::vector<double> out(static_cast<size_t>(size()));
  const void* p = raw_data();
  WEFT_DTYPE_SWITCH(dtype_, DT, "NDArray::to_doubles", {
    const DT* src = static_cast<const DT*>(p);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(src[i]);
  });
  return out;
}

double NDArray::item() const {
  WEFT_CHECK(size() == 1) << "NDArray::item: array has " << size() << " elements, not 1";
  return to_doubles()[0];
}

std::string NDArray::to_string(int max_elements) const {
  std::ostringstream os;
  if (is_none()) return "NDArray(none)";
  os << "NDArray " << shape_ << " " << dtype_name(dtype_) << " @" << weft::to_string(device())
     << "\n[";
  auto v = to_doubles();
  for (size_t i = 0; i < v.size() && static_cast<int>(i) < max_elements; ++i)
    os << (i ? ", " : "") << v[i];
  if (static_cast<int>(v.size()) > max_elements) os << ", ...";
  os << "]";
  return os.str();
}

NDArray& NDArray::operator+=(const NDArray& other) {
  InvokeOptions o;
  o.outputs = {*this};
  invoke("elemwise_add", {*this, other}, {}, std::move(o));
  return *this;
}
NDArray& NDArray::operator-=(const NDArray& other) {
  InvokeOptions o;
  o.outputs = {*this};
  invoke("elemwise_sub", {*this, other}, {}, std::move(o));
  return *this;
}
NDArray& NDArray::operator*=(const NDArray& other) {
  InvokeOptions o;
  o.outputs = {*this};
  invoke("elemwise_mul", {*this, other}, {}, std::move(o));
  return *this;
}
NDArray& NDArray::operator/=(const NDArray& other) {
  InvokeOptions o;
  o.outputs = {*this};
  invoke("elemwise_div", {*this, other}, {}, std::move(o));
  return *this;
}

}  // namespace weft
