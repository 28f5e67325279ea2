// The C ABI: arrays, operator invocation and autograd.
#include "capi/c_api_internal.h"
#include "ndarray/autograd.h"
#include "ndarray/runtime.h"

namespace weft::capi {

// Note [Generation-checked handles]: constant-initialised, so usable from any static
// initialiser or destructor; the tables are never destroyed (trivially destructible).
constinit HandleTable<weft_array_s> g_array_handles{HandleKind::kArray, "array"};
static_assert(std::is_trivially_destructible_v<HandleTable<weft_array_s>>);

weft_array_t new_array_handle(NDArray array) {
  auto object = std::make_unique<weft_array_s>();
  object->array = std::move(array);
  return make_handle(g_array_handles, std::move(object));
}

}  // namespace weft::capi

using namespace weft;        // NOLINT(google-build-using-namespace)
using namespace weft::capi;  // NOLINT(google-build-using-namespace)

extern "C" {

int weft_array_zeros(const int64_t* shape, int ndim, int dtype, weft_device_t device,
                     weft_array_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = nullptr;
  Shape s = to_shape(shape, ndim, "shape");
  *out = new_array_handle(NDArray::zeros(s, to_dtype(dtype), to_device(device)));
  WEFT_C_END("weft_array_zeros")
}

int weft_array_from_host(const void* data, size_t bytes, const int64_t* shape, int ndim, int dtype,
                         weft_device_t device, weft_array_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = nullptr;
  Shape s = to_shape(shape, ndim, "shape");
  const DType t = to_dtype(dtype);
  const size_t need = shape_bytes(s, dtype_size(t), "the array");
  WEFT_CHECK_AS(ValueError, bytes == need) << "shape " << s << " of " << dtype_name(t) << " holds "
                                           << need << " bytes; " << bytes << " given";
  WEFT_CHECK_AS(ValueError, need == 0 || data != nullptr) << "argument 'data' is NULL";
  *out = new_array_handle(NDArray::from_host(data, s, t, to_device(device)));
  WEFT_C_END("weft_array_from_host")
}

int weft_array_retain(weft_array_t array, weft_array_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = new_array_handle(array_of(array, "array").array);
  WEFT_C_END("weft_array_retain")
}

int weft_array_free(weft_array_t array) {
  WEFT_C_BEGIN
  free_handle(g_array_handles, array, "array", "array");
  WEFT_C_END("weft_array_free")
}

int weft_array_shape(weft_array_t array, const int64_t** shape, int* ndim) {
  WEFT_C_BEGIN
  require(shape, "shape");
  require(ndim, "ndim");
  const NDArray& a = array_of(array, "array").array;
  *shape = a.shape().data();
  *ndim = a.ndim();
  WEFT_C_END("weft_array_shape")
}

int weft_array_dtype(weft_array_t array, int* dtype) {
  WEFT_C_BEGIN
  require(dtype, "dtype");
  *dtype = static_cast<int>(array_of(array, "array").array.dtype());
  WEFT_C_END("weft_array_dtype")
}

int weft_array_device(weft_array_t array, weft_device_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = from_device(array_of(array, "array").array.device());
  WEFT_C_END("weft_array_device")
}

int weft_array_var(weft_array_t array, weft_var_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = from_var(array_of(array, "array").array.var());
  WEFT_C_END("weft_array_var")
}

int weft_array_data(weft_array_t array, void** out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = array_of(array, "array").array.raw_data();
  WEFT_C_END("weft_array_data")
}

int weft_array_wait_to_read(weft_array_t array) {
  WEFT_C_BEGIN
  array_of(array, "array").array.wait_to_read();
  WEFT_C_END("weft_array_wait_to_read")
}

int weft_array_to_host(weft_array_t array, void* dst, size_t bytes) {
  WEFT_C_BEGIN
  const NDArray& a = array_of(array, "array").array;
  WEFT_CHECK_AS(ValueError, bytes == a.nbytes())
      << "the array " << a.shape() << " " << dtype_name(a.dtype()) << " holds " << a.nbytes()
      << " bytes; the destination has " << bytes;
  WEFT_CHECK_AS(ValueError, bytes == 0 || dst != nullptr) << "argument 'dst' is NULL";
  a.copy_to_host(dst, bytes);
  WEFT_C_END("weft_array_to_host")
}

int weft_array_copy_to(weft_array_t src, weft_array_t dst) {
  WEFT_C_BEGIN
  const NDArray& s = array_of(src, "src").array;
  NDArray& d = array_of(dst, "dst").array;
  WEFT_CHECK_AS(ValueError, !d.storage()->read_only)
      << "'dst' is a read-only array (imported from a read-only DLPack tensor)";
  WEFT_CHECK_AS(ShapeError, s.shape() == d.shape() && s.dtype() == d.dtype())
      << "'src' is " << s.shape() << " " << dtype_name(s.dtype()) << " but 'dst' is " << d.shape()
      << " " << dtype_name(d.dtype());
  s.copy_to(d);
  WEFT_C_END("weft_array_copy_to")
}

int weft_array_is_read_only(weft_array_t array, int* out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = array_of(array, "array").array.storage()->read_only ? 1 : 0;
  WEFT_C_END("weft_array_is_read_only")
}

int weft_invoke(const char* op, const weft_array_t* inputs, int num_inputs, const char* const* keys,
                const char* const* values, int num_attrs, weft_array_t* outputs, int* num_outputs) {
  WEFT_C_BEGIN
  require(op, "op");
  require(num_outputs, "num_outputs");
  WEFT_CHECK_AS(ValueError, num_inputs >= 0 && (num_inputs == 0 || inputs != nullptr))
      << "argument 'inputs' is NULL or num_inputs " << num_inputs << " is negative";
  WEFT_CHECK_AS(ValueError,
                num_attrs >= 0 && (num_attrs == 0 || (keys != nullptr && values != nullptr)))
      << "attribute lists are NULL or num_attrs " << num_attrs << " is negative";
  const int capacity = *num_outputs;
  WEFT_CHECK_AS(ValueError, capacity >= 0 && (capacity == 0 || outputs != nullptr))
      << "argument 'outputs' is NULL or its capacity " << capacity << " is negative";
  std::vector<NDArray> in;
  in.reserve(num_inputs);
  for (int i = 0; i < num_inputs; ++i) {
    const std::string arg = "inputs[" + std::to_string(i) + "]";
    in.push_back(array_of(inputs[i], arg.c_str()).array);
  }
  AttrMap attrs;
  for (int i = 0; i < num_attrs; ++i) {
    WEFT_CHECK_AS(ValueError, keys[i] != nullptr && values[i] != nullptr)
        << "attribute " << i << " has a NULL key or value";
    attrs[keys[i]] = values[i];
  }
  std::shared_ptr<const OpAttrs> parsed = cached_op_attrs(op, attrs);  // Note [Attribute cache]
  const int nvis = parsed->op->num_visible_outputs(*parsed);
  WEFT_CHECK_AS(ValueError, nvis <= capacity)
      << "operator '" << op << "' has " << nvis << " outputs; 'outputs' has room for " << capacity;
  std::vector<NDArray> result = invoke(parsed, in);
  for (int i = 0; i < nvis; ++i) outputs[i] = new_array_handle(std::move(result[i]));
  *num_outputs = nvis;
  WEFT_C_END("weft_invoke")
}

int weft_op_exists(const char* name, int* out) {
  WEFT_C_BEGIN
  require(name, "name");
  require(out, "out");
  *out = OpRegistry::global().find(name) != nullptr ? 1 : 0;
  WEFT_C_END("weft_op_exists")
}

int weft_autograd_set_recording(int recording, int* previous) {
  WEFT_C_BEGIN
  const bool prev = autograd::set_recording(recording != 0);
  if (previous != nullptr) *previous = prev ? 1 : 0;
  WEFT_C_END("weft_autograd_set_recording")
}

int weft_autograd_set_training(int training, int* previous) {
  WEFT_C_BEGIN
  const bool prev = autograd::set_training(training != 0);
  if (previous != nullptr) *previous = prev ? 1 : 0;
  WEFT_C_END("weft_autograd_set_training")
}

int weft_array_attach_grad(weft_array_t array, int grad_req) {
  WEFT_C_BEGIN
  WEFT_CHECK_AS(ValueError, grad_req >= WEFT_GRAD_NULL && grad_req <= WEFT_GRAD_ADD)
      << "grad_req " << grad_req << " is not 0 (null), 1 (write) or 2 (add)";
  array_of(array, "array").array.attach_grad(static_cast<GradReq>(grad_req));
  WEFT_C_END("weft_array_attach_grad")
}

int weft_array_grad(weft_array_t array, weft_array_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  NDArray g = array_of(array, "array").array.grad();
  WEFT_CHECK(!g.is_none()) << "the array has no gradient buffer (call weft_array_attach_grad)";
  *out = new_array_handle(std::move(g));
  WEFT_C_END("weft_array_grad")
}

int weft_array_backward(weft_array_t head, weft_array_t head_grad) {
  WEFT_C_BEGIN
  const NDArray& h = array_of(head, "head").array;
  if (head_grad == nullptr) {
    h.backward();
  } else {
    h.backward(array_of(head_grad, "head_grad").array);
  }
  WEFT_C_END("weft_array_backward")
}

}  // extern "C"
