// NDArray: shared storage + an engine var + a view (shape, dtype, offset). Operations on it are
// pushed onto the engine and return at once; reading values waits.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "memory/data_ptr.h"
#include "ops/attr_cache.h"
#include "ops/op.h"

namespace weft {

namespace detail {
/// Storage shared by an array and its views: the memory, the engine var ordering every access
/// to it, and a process-unique id. Destroying it deletes the var; the memory goes back to its
/// pool only after every pending operation on the var has completed.
struct Storage {
  DataPtr data;
  VarHandle var = nullptr;
  Engine* engine = nullptr;
  Device device;
  size_t bytes = 0;
  uint64_t id = 0;
  uint64_t generation = 0;  ///< the runtime generation that owns `var`
  /// Memory lent read-only (a DLPack tensor flagged read-only): operators refuse to write it.
  bool read_only = false;
  /// Memory and variable from allocate_storage: reused for a new array of the same size when
  /// this one dies idle (Note [Recycled storage] in ndarray.cc).
  bool recyclable = false;
  Storage() = default;
  Storage(const Storage&) = delete;
  ~Storage();
};
struct AutogradEntry;
}  // namespace detail

/// How a leaf array's gradient buffer is written by backward().
enum class GradReq { kNull, kWrite, kAdd };

/// An n-dimensional array on a device. Copies are cheap and share storage (like a shared
/// pointer); views made by reshape()/slice() share storage and engine var too.
///
/// Asynchrony: operations that produce or modify arrays push work onto the engine and return
/// before it runs; the engine orders them by the arrays they read and write. Methods that
/// return values (to_vector, item, ...) wait for pending writes first.
///
/// Thread safety: distinct NDArray objects may be used from different threads; a single object
/// must not be mutated (assigned, attach_grad) concurrently.
class NDArray {
 public:
  /// A "none" array (no storage).
  NDArray() = default;

  /// Uninitialised storage for `shape` (which must be known).
  static NDArray empty(const Shape& shape, DType dtype = DType::kFloat32,
                       Device device = Device::cpu());
  static NDArray zeros(const Shape& shape, DType dtype = DType::kFloat32,
                       Device device = Device::cpu());
  static NDArray ones(const Shape& shape, DType dtype = DType::kFloat32,
                      Device device = Device::cpu());
  static NDArray full(const Shape& shape, double value, DType dtype = DType::kFloat32,
                      Device device = Device::cpu());
  /// Copies `count` elements of `dtype` from host memory (the copy is made before returning).
  static NDArray from_host(const void* data, const Shape& shape, DType dtype,
                           Device device = Device::cpu());
  template <typename T>
  static NDArray from_vector(const Shape& shape, const std::vector<T>& values,
                             Device device = Device::cpu()) {
    WEFT_CHECK(static_cast<int64_t>(values.size()) == shape.size())
        << "NDArray::from_vector: shape " << shape << " needs " << shape.size() << " values, got "
        << values.size();
    return from_host(values.data(), shape, DTypeOf<T>::value, device);
  }
  /// Uniform / normal random values (ordered through the device's random var).
  static NDArray uniform(const Shape& shape, double low = 0, double high = 1,
                         DType dtype = DType::kFloat32, Device device = Device::cpu());
  static NDArray normal(const Shape& shape, double loc = 0, double scale = 1,
                        DType dtype = DType::kFloat32, Device device = Device::cpu());
  static NDArray arange(double start, double stop, double step = 1, DType dtype = DType::kFloat32,
                        Device device = Device::cpu());

  bool is_none() const { return storage_ == nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return shape_.ndim(); }
  DType dtype() const { return dtype_; }
  Device device() const;
  int64_t size() const { return shape_.size(); }
  size_t nbytes() const { return static_cast<size_t>(size()) * dtype_size(dtype_); }
  /// The engine var of the storage (shared with views).
  VarHandle var() const;
  /// Completed writes to the storage so far.
  uint64_t version() const;
  /// The process-unique id of the storage.
  uint64_t storage_id() const;
  /// Whether `other` shares this array's storage.
  bool shares_storage_with(const NDArray& other) const {
    return storage_ && storage_ == other.storage_;
  }

  /// A view with another shape of the same size; one dim may be -1. Shares storage and var.
  NDArray reshape(const Shape& shape) const;
  /// A view of rows [begin, end) along the first axis.
  NDArray slice(int64_t begin, int64_t end) const;
  /// A view of row `i` along the first axis, with that axis dropped.
  NDArray at(int64_t i) const;

  /// A new array with a copy of the values (asynchronous).
  NDArray copy() const;
  /// A copy on `device` (asynchronous).
  NDArray copy_to(Device device) const;
  /// Copies this array's values into `dst` (same shape and dtype) asynchronously.
  void copy_to(NDArray& dst) const;

  /// Waits until pending writes to this array have completed (rethrows their error).
  void wait_to_read() const;
  /// Waits until pending reads and writes have completed.
  void wait_to_write() const;
  /// Waits, then copies the values to host memory of nbytes() bytes.
  void copy_to_host(void* dst, size_t bytes) const;
  template <typename T>
  std::vector<T> to_vector() const {
    WEFT_CHECK(DTypeOf<T>::value == dtype_)
        << "NDArray::to_vector: array has dtype " << dtype_name(dtype_) << ", asked for "
        << dtype_name(DTypeOf<T>::value);
    std::vector<T> out(static_cast<size_t>(size()));
    copy_to_host(out.data(), out.size() * sizeof(T));
    return out;
  }
  /// The values converted to double (any dtype), waiting first.
  std::vector<double> to_doubles() const;
  /// The value of a one-element array.
  double item() const;
  /// "NDArray (2, 3) float32 @cpu:0\n[v0, v1, ...]": the values flattened, at most
  /// `max_elements` of them (waits).
  std::string to_string(int max_elements = 64) const;

  /// A view for kernels: valid only while the caller holds this array and inside operations
  /// ordered on its var (or after waiting).
  TensorView view() const;
  /// Raw pointer to the first element (the storage stays owned by the array).
  void* raw_data() const;

  // ---- autograd ----
  /// Marks this array as a leaf that receives a gradient in backward(): allocates a zeroed
  /// gradient buffer with `req` (kWrite overwrites, kAdd accumulates, kNull detaches).
  void attach_grad(GradReq req = GradReq::kWrite);
  /// The gradient buffer (none when attach_grad was not called).
  NDArray grad() const;
  /// Runs backward from this array (see autograd::backward).
  void backward() const;
  void backward(const NDArray& head_grad, bool retain_graph = false, bool train_mode = true) const;
  /// The same storage without autograd history.
  NDArray detach() const;
  /// Whether autograd tracks this array (a leaf with a gradient, or a recorded result).
  bool requires_grad() const;

  // ---- arithmetic (free functions in ndarray/ops.h build on invoke) ----
  NDArray& operator+=(const NDArray& other);
  NDArray& operator-=(const NDArray& other);
  NDArray& operator*=(const NDArray& other);
  NDArray& operator/=(const NDArray& other);

  // Internals for invoke and autograd.
  const std::shared_ptr<detail::Storage>& storage() const { return storage_; }
  size_t byte_offset() const { return byte_offset_; }
  const std::shared_ptr<detail::AutogradEntry>& autograd_entry() const { return autograd_; }
  void set_autograd_entry(std::shared_ptr<detail::AutogradEntry> entry) {
    autograd_ = std::move(entry);
  }
  /// Wraps existing storage (used by invoke and the executor).
  NDArray(std::shared_ptr<detail::Storage> storage, Shape shape, DType dtype,
          size_t byte_offset = 0)
      : storage_(std::move(storage)),
        shape_(std::move(shape)),
        dtype_(dtype),
        byte_offset_(byte_offset) {}

 private:
  void copy_across_devices(NDArray& dst) const;

  void check_not_none(const char* what) const;
  std::shared_ptr<detail::Storage> storage_;
  Shape shape_;
  DType dtype_ = DType::kFloat32;
  size_t byte_offset_ = 0;
  std::shared_ptr<detail::AutogradEntry> autograd_;
};

/// Allocates storage of `bytes` on `device` from the runtime's pool, with a new engine var.
std::shared_ptr<detail::Storage> allocate_storage(size_t bytes, Device device);

// ---- invoking operators -----------------------------------------------------------------------

/// Options of one invocation.
struct InvokeOptions {
  /// Write results into these arrays instead of new ones (one per output, hidden included, or
  /// one per visible output; hidden outputs then get new storage). Empty = allocate.
  std::vector<NDArray> outputs;
  /// Per output request (default kWrite; kAdd accumulates into `outputs`).
  std::vector<OpReq> req;
  /// Device to run on; default: the first input's device, or the CPU.
  std::optional<Device> device;
};

/// Runs `attrs.op` on `inputs`: infers shapes and types, takes outputs from the pool, pushes the
/// kernel (inputs read, outputs and mutated inputs written) and returns every output, hidden ones
/// included, before the kernel runs. Records the call for autograd when recording and an input
/// requires grad. Throws (nothing pushed) on bad arity, shapes, types, or a missing kernel.
std::vector<NDArray> invoke_all(const std::shared_ptr<const OpAttrs>& attrs,
                                const std::vector<NDArray>& inputs, InvokeOptions options = {});
/// As invoke_all, returning only the visible outputs.
std::vector<NDArray> invoke(const std::shared_ptr<const OpAttrs>& attrs,
                            const std::vector<NDArray>& inputs, InvokeOptions options = {});
/// Looks up and parses: invoke(op name, inputs, attribute dict).
std::vector<NDArray> invoke(std::string_view op, const std::vector<NDArray>& inputs,
                            const AttrMap& attrs = {}, InvokeOptions options = {});
/// The first visible output of invoke().
NDArray invoke1(std::string_view op, const std::vector<NDArray>& inputs, const AttrMap& attrs = {});

/// Infers `attrs.op`'s output shapes and types for `inputs` (out_shapes/out_types sized to the
/// op's outputs, pre-filled where the caller knows them) and checks that the inputs agree with
/// what the op needs. Throws ShapeError naming the op for a mismatch or an output it cannot
/// infer. `in_shapes`/`in_types` are scratch. Used by invoke and by synchronous host runners.
void infer_outputs(const OpAttrs& attrs, const std::vector<NDArray>& inputs,
                   std::vector<Shape>& in_shapes, std::vector<DType>& in_types,
                   std::vector<Shape>& out_shapes, std::vector<DType>& out_types);

}  // namespace weft
