/* weft's stable C ABI: an hourglass over the C++ library (docs/C_API.md).
 *
 * Rules, in short:
 * - Every function returns 0 on success and -1 on failure; weft_last_error() then gives a message
 *   naming what was wrong (thread-local, valid until the next failing call on the same thread).
 *   No C++ exception crosses this boundary.
 * - Handles are opaque. An array handle owns one reference to its array: free it exactly once with
 *   weft_array_free(). A freed handle, used or freed again, is an error naming it (handles are
 *   generation-checked, docs/C_API.md). Variables (weft_var_t) are 16-byte values; copy them
 *   freely.
 * - Every function is thread-safe unless its comment says otherwise.
 * - ABI versioning: WEFT_C_ABI_VERSION changes whenever a signature or a struct layout changes.
 *   Structs passed in by the caller begin with `struct_size` so that fields can be appended.
 */
#ifndef WEFT_C_API_H_
#define WEFT_C_API_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WEFT_C_EXPORT __attribute__((visibility("default")))
#else
#define WEFT_C_EXPORT
#endif

/* The ABI this header describes. A plugin built against another major version is refused. */
#define WEFT_C_ABI_VERSION 1u

/* ---- DLPack 1.x's versioned tensor (Debian's dlpack 0.6 lacks it; the layout is DLPack's) ---- */
#ifndef DLPACK_MAJOR_VERSION
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#define DLPACK_FLAG_BITMASK_READ_ONLY (1ull << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1ull << 1)
#endif

/* ---- basic types ------------------------------------------------------------------------------
 */

/* Element types: MXNet's type flags. */
typedef enum {
  WEFT_FLOAT32 = 0,
  WEFT_FLOAT64 = 1,
  WEFT_FLOAT16 = 2,
  WEFT_UINT8 = 3,
  WEFT_INT32 = 4,
  WEFT_INT8 = 5,
  WEFT_INT64 = 6,
  WEFT_BOOL = 7,
  WEFT_INT16 = 8,
  WEFT_UINT16 = 9,
  WEFT_UINT32 = 10,
  WEFT_UINT64 = 11,
  WEFT_BFLOAT16 = 12
} weft_dtype;

/* A device: DLPack's device type codes (kDLCPU = 1, kDLCUDA = 2) and an ordinal. */
typedef struct {
  int32_t type;
  int32_t id;
} weft_device_t;

/* An engine variable: a 16-byte value (address and generation), opaque. A zeroed one is null. */
typedef struct {
  uint64_t opaque[2];
} weft_var_t;

/* Where a running operation runs. `stream` is the cudaStream_t to launch on (NULL on the CPU):
 * launching on the default stream instead breaks the engine's ordering. */
typedef struct {
  weft_device_t device;
  void* stream;
  int32_t worker; /* worker index in its pool; -1 off the engine's workers */
} weft_run_context_t;

/* Completes an asynchronous operation (weft_complete). A 32-byte value; copies refer to the same
 * completion, which must happen exactly once. */
typedef struct {
  uint64_t opaque[4];
} weft_completion_t;

typedef struct weft_array_s* weft_array_t;
typedef struct weft_graph_s* weft_graph_t;
typedef struct weft_executor_s* weft_executor_t;
typedef struct weft_attrs_s weft_attrs_t; /* an operator application's attributes, during a call */

/* ---- errors and versions ----------------------------------------------------------------------
 */

/* The message of the last failing call on this thread ("" when none). */
WEFT_C_EXPORT const char* weft_last_error(void);
/* Sets this thread's error message; a foreign function reports failure by calling this and
 * returning non-zero. Returns -1 (convenient as `return weft_set_error("...")`). */
WEFT_C_EXPORT int weft_set_error(const char* message);
/* The library's version ("0.1.0") and the ABI it implements. */
WEFT_C_EXPORT const char* weft_version(void);
WEFT_C_EXPORT uint32_t weft_abi_version(void);

/* ---- engine -----------------------------------------------------------------------------------
 */

/* A synchronous operation body: returns 0, or non-zero after weft_set_error() (the error is
 * attached to the variables it writes). */
typedef int (*weft_sync_fn)(const weft_run_context_t* ctx, void* user);
/* An asynchronous operation body: launches work and returns; `done` is completed exactly once,
 * later or now, from any thread, with weft_complete(). */
typedef void (*weft_async_fn)(const weft_run_context_t* ctx, weft_completion_t done, void* user);
/* Frees `user` after the operation ran or was skipped (or when the push fails). May be NULL. */
typedef void (*weft_free_fn)(void* user);

WEFT_C_EXPORT int weft_var_new(weft_var_t* out);
/* Deletes the variable after the operations already pushed on it; the value is invalid after. */
WEFT_C_EXPORT int weft_var_delete(weft_var_t var);
/* Completed writes of the variable so far. */
WEFT_C_EXPORT int weft_var_version(weft_var_t var, uint64_t* out);

/* Pushes an operation that reads `reads` and writes `writes`; returns before it runs. Higher
 * `priority` runs first among ready operations. `name` (may be NULL) appears in errors and traces.
 */
WEFT_C_EXPORT int weft_push_sync(weft_sync_fn fn, void* user, weft_free_fn free_user,
                                 weft_device_t device, const weft_var_t* reads, size_t num_reads,
                                 const weft_var_t* writes, size_t num_writes, int priority,
                                 const char* name);
WEFT_C_EXPORT int weft_push_async(weft_async_fn fn, void* user, weft_free_fn free_user,
                                  weft_device_t device, const weft_var_t* reads, size_t num_reads,
                                  const weft_var_t* writes, size_t num_writes, int priority,
                                  const char* name);
/* Completes an asynchronous operation, failed with `error` when it is not NULL. A second call of
 * the same completion fails (-1) and releases nothing. Any thread. */
WEFT_C_EXPORT int weft_complete(weft_completion_t done, const char* error);
/* Waits for the operations on `var`, then reports (and clears) its error. */
WEFT_C_EXPORT int weft_wait_var(weft_var_t var);
/* Waits for every operation; fails with the first error since the last wait (and clears them). */
WEFT_C_EXPORT int weft_wait_all(void);
/* The run context of the operation running on this thread (fails when none is running). */
WEFT_C_EXPORT int weft_current_context(weft_run_context_t* out);

/* ---- arrays -----------------------------------------------------------------------------------
 */

/* A new array of zeros. */
WEFT_C_EXPORT int weft_array_zeros(const int64_t* shape, int ndim, int dtype, weft_device_t device,
                                   weft_array_t* out);
/* A new array holding a copy of `bytes` bytes of host memory (which must match the shape). */
WEFT_C_EXPORT int weft_array_from_host(const void* data, size_t bytes, const int64_t* shape,
                                       int ndim, int dtype, weft_device_t device,
                                       weft_array_t* out);
/* Another handle to the same array (shares storage). */
WEFT_C_EXPORT int weft_array_retain(weft_array_t array, weft_array_t* out);
/* Releases the handle (NULL is accepted). Pending work on the array still completes. */
WEFT_C_EXPORT int weft_array_free(weft_array_t array);
/* The shape: `*shape` points into the handle and is valid while it lives. */
WEFT_C_EXPORT int weft_array_shape(weft_array_t array, const int64_t** shape, int* ndim);
WEFT_C_EXPORT int weft_array_dtype(weft_array_t array, int* dtype);
WEFT_C_EXPORT int weft_array_device(weft_array_t array, weft_device_t* out);
/* The variable ordering access to the array's storage: push foreign operations on it. */
WEFT_C_EXPORT int weft_array_var(weft_array_t array, weft_var_t* out);
/* The address of the first element. Touch it only inside an operation that lists the array's
 * variable, or after weft_array_wait_to_read(). */
WEFT_C_EXPORT int weft_array_data(weft_array_t array, void** out);
/* Waits for pending writes (and reports their error). */
WEFT_C_EXPORT int weft_array_wait_to_read(weft_array_t array);
/* Waits, then copies the array into `bytes` bytes of host memory (which must equal its size). */
WEFT_C_EXPORT int weft_array_to_host(weft_array_t array, void* dst, size_t bytes);

/* Copies `src` into `dst` (same shape and dtype); ordered like any operation, returns at once.
 * Fails for a read-only `dst`. */
WEFT_C_EXPORT int weft_array_copy_to(weft_array_t src, weft_array_t dst);
/* Whether the array is read-only (imported from a read-only DLPack tensor): *out = 1 or 0. */
WEFT_C_EXPORT int weft_array_is_read_only(weft_array_t array, int* out);

/* DLPack export: waits for pending writes, then shares the storage (zero-copy); the array stays
 * alive until the consumer calls the tensor's deleter. */
WEFT_C_EXPORT int weft_array_to_dlpack(weft_array_t array, DLManagedTensor** out);
WEFT_C_EXPORT int weft_array_to_dlpack_versioned(weft_array_t array,
                                                 DLManagedTensorVersioned** out);
/* DLPack import: wraps the tensor's memory (zero-copy) and takes ownership of `tensor`: its
 * deleter runs once weft no longer uses the memory. On failure ownership stays with the caller.
 * Compact row-major tensors only (strides NULL or compact); CPU (and CUDA where built). A
 * read-only versioned tensor gives an array that operators refuse to write. */
WEFT_C_EXPORT int weft_array_from_dlpack(DLManagedTensor* tensor, weft_array_t* out);
WEFT_C_EXPORT int weft_array_from_dlpack_versioned(DLManagedTensorVersioned* tensor,
                                                   weft_array_t* out);

/* ---- operators --------------------------------------------------------------------------------
 */

/* Runs the operator `op` (built-in or registered) on `inputs` with string attributes; returns
 * before the kernel runs. On input `*num_outputs` is the capacity of `outputs`; on return the
 * number of visible outputs, each a new handle. */
WEFT_C_EXPORT int weft_invoke(const char* op, const weft_array_t* inputs, int num_inputs,
                              const char* const* keys, const char* const* values, int num_attrs,
                              weft_array_t* outputs, int* num_outputs);
/* Whether an operator of that name (or alias) is registered: *out = 1 or 0. */
WEFT_C_EXPORT int weft_op_exists(const char* name, int* out);
/* The registry's schema of operator `name` (or an alias; NULL or "" for every operator, as a JSON
 * array sorted by name, `_backward_*` operators left out) as a JSON object: name, description,
 * aliases, inputs (the widest list of input names; null when unknown), variadic (the parameter
 * that counts the inputs, or null), outputs, num_outputs, num_visible_outputs, outputs_depend_on,
 * params (name, type, required, default typed as JSON, default_text, description, choices),
 * has_gradient, kernels, runtime; docs/OPERATORS.md describes each. `*json_out` is owned by weft
 * and stays valid until the next call of weft_op_schema on the same thread. Fails (-1) for an
 * unknown operator; *json_out is NULL then. Thread-safe. */
WEFT_C_EXPORT int weft_op_schema(const char* name, const char** json_out);

/* ---- autograd ---------------------------------------------------------------------------------
 */

typedef enum { WEFT_GRAD_NULL = 0, WEFT_GRAD_WRITE = 1, WEFT_GRAD_ADD = 2 } weft_grad_req;

/* Turns recording on or off on this thread; the previous setting goes to `*previous` (may be
 * NULL). Training mode likewise. */
WEFT_C_EXPORT int weft_autograd_set_recording(int recording, int* previous);
WEFT_C_EXPORT int weft_autograd_set_training(int training, int* previous);
WEFT_C_EXPORT int weft_array_attach_grad(weft_array_t array, int grad_req);
/* The gradient buffer of an array with attach_grad (a new handle). */
WEFT_C_EXPORT int weft_array_grad(weft_array_t array, weft_array_t* out);
/* Backward from `head`; `head_grad` may be NULL (ones). */
WEFT_C_EXPORT int weft_array_backward(weft_array_t head, weft_array_t head_grad);

/* ---- graphs -----------------------------------------------------------------------------------
 */

/* Loads an MXNet/NNVM graph (symbol JSON) from memory or a file. */
WEFT_C_EXPORT int weft_graph_load_json(const char* json, size_t length, weft_graph_t* out);
WEFT_C_EXPORT int weft_graph_load_file(const char* path, weft_graph_t* out);
WEFT_C_EXPORT int weft_graph_free(weft_graph_t graph);
/* Binds the graph on `device` with the shapes of its inputs (by name; shapes[i] has ndims[i]
 * entries). Arguments without a given shape (weights) are inferred and allocated as zeros: fill
 * them with weft_executor_set_arg. grad_req applies to every argument. */
WEFT_C_EXPORT int weft_executor_bind(weft_graph_t graph, weft_device_t device,
                                     const char* const* input_names, const int64_t* const* shapes,
                                     const int* ndims, int num_inputs, int grad_req,
                                     weft_executor_t* out);
WEFT_C_EXPORT int weft_executor_free(weft_executor_t exec);
/* Copies `value` into the bound argument (or auxiliary state) `name`; ordered before the next
 * forward. The shapes and dtypes must match. */
WEFT_C_EXPORT int weft_executor_set_arg(weft_executor_t exec, const char* name, weft_array_t value);
/* A handle to the bound argument / auxiliary state / gradient `name`. */
WEFT_C_EXPORT int weft_executor_arg(weft_executor_t exec, const char* name, weft_array_t* out);
WEFT_C_EXPORT int weft_executor_grad(weft_executor_t exec, const char* name, weft_array_t* out);
/* Push the passes and return at once. head_grads may be NULL (ones; loss heads need none). */
WEFT_C_EXPORT int weft_executor_forward(weft_executor_t exec, int is_train);
WEFT_C_EXPORT int weft_executor_backward(weft_executor_t exec, const weft_array_t* head_grads,
                                         int num_head_grads);
WEFT_C_EXPORT int weft_executor_num_outputs(weft_executor_t exec, int* out);
WEFT_C_EXPORT int weft_executor_output(weft_executor_t exec, int index, weft_array_t* out);

/* ---- foreign operators ------------------------------------------------------------------------
 */

/* The kind of a foreign operator's kernel. */
typedef enum {
  WEFT_OP_PURE = 0,      /* compute(inputs) -> outputs */
  WEFT_OP_WORKSPACE = 1, /* likewise, with scratch memory of the size workspace_size() asks for */
  WEFT_OP_ASYNC = 2      /* launches work; completes later through the completion handle */
} weft_op_kind;

/* How a kernel writes an output. */
typedef enum {
  WEFT_REQ_NULL = 0,
  WEFT_REQ_WRITE = 1,
  WEFT_REQ_INPLACE = 2,
  WEFT_REQ_ADD = 3
} weft_req;

/* Most dimensions an inferred output shape may have. */
#define WEFT_MAX_NDIM 8

/* One attribute of a foreign operator's schema. `type` is "int", "float", "bool", "string",
 * "shape" or "dtype"; `default_value` NULL makes it required. Values are checked against the type
 * when the operator is applied, with errors naming the operator, node and attribute. */
typedef struct {
  const char* name;
  const char* type;
  const char* default_value;
  const char* description;
} weft_attr_def;

/* Attribute getters for callbacks: fail (-1) for a key outside the schema. */
WEFT_C_EXPORT int weft_attrs_get_string(const weft_attrs_t* attrs, const char* key,
                                        const char** out);
WEFT_C_EXPORT int weft_attrs_get_int(const weft_attrs_t* attrs, const char* key, int64_t* out);
WEFT_C_EXPORT int weft_attrs_get_float(const weft_attrs_t* attrs, const char* key, double* out);
/* A shape attribute: up to `capacity` entries into `out`, the count into `*ndim`. */
WEFT_C_EXPORT int weft_attrs_get_shape(const weft_attrs_t* attrs, const char* key, int64_t* out,
                                       int capacity, int* ndim);

/* Shape inference: input shapes are known (in_shapes[i] has in_ndims[i] entries); write each
 * output's shape into out_shapes[o * WEFT_MAX_NDIM ...] and its rank into out_ndims[o]. Return 0,
 * or non-zero after weft_set_error(). */
typedef int (*weft_infer_shape_fn)(const weft_attrs_t* attrs, int num_inputs,
                                   const int64_t* const* in_shapes, const int* in_ndims,
                                   int num_outputs, int64_t* out_shapes, int* out_ndims,
                                   void* user);
/* Type inference: in_types known; write out_types. NULL: every output has the first input's type
 * and all inputs must agree. */
typedef int (*weft_infer_type_fn)(const weft_attrs_t* attrs, int num_inputs, const int* in_types,
                                  int num_outputs, int* out_types, void* user);
/* Bytes of scratch a WEFT_OP_WORKSPACE kernel needs for these input shapes. */
typedef int (*weft_workspace_fn)(const weft_attrs_t* attrs, int num_inputs,
                                 const int64_t* const* in_shapes, const int* in_ndims,
                                 size_t* bytes, void* user);

/* What a kernel call gets. Tensors are compact, row-major, valid during the call only.
 * `struct_size` is sizeof(weft_op_call_t) of the weft that made the call: fields may be appended
 * in later versions, so read fields past the ones you know only when struct_size covers them. */
typedef struct {
  uint32_t struct_size;
  const weft_attrs_t* attrs;
  const DLTensor* inputs;
  int num_inputs;
  const DLTensor* outputs;
  int num_outputs;
  const int* req; /* per output, weft_req */
  void* workspace;
  size_t workspace_bytes;
  weft_run_context_t ctx;
  int is_train;
  int num_threads; /* intra-op threads the kernel may use (>= 1), weft's budget for this call */
} weft_op_call_t;

/* WEFT_OP_PURE and WEFT_OP_WORKSPACE kernels: return 0, or non-zero after weft_set_error(). */
typedef int (*weft_compute_fn)(const weft_op_call_t* call, void* user);
/* WEFT_OP_ASYNC kernels: complete `done` exactly once (weft_complete), from any thread. The call
 * struct and tensors are valid only until this function returns; the memory they describe stays
 * valid (and reserved for this operation) until `done` is completed. */
typedef void (*weft_async_compute_fn)(const weft_op_call_t* call, weft_completion_t done,
                                      void* user);

/* Device mask bits for weft_op_def.devices. */
#define WEFT_DEVICE_MASK_CPU 1u
#define WEFT_DEVICE_MASK_CUDA 2u

/* A foreign operator. Set struct_size = sizeof(weft_op_def); zero what you do not use. */
typedef struct {
  uint32_t struct_size;
  const char* name;
  const char* description;
  int num_inputs;
  int num_outputs;
  const char* const* input_names;  /* num_inputs names, or NULL ("data", "data1", ...) */
  const char* const* output_names; /* num_outputs names, or NULL */
  const weft_attr_def* attrs;
  int num_attrs;
  int kind;                            /* weft_op_kind */
  uint32_t devices;                    /* WEFT_DEVICE_MASK_* the kernel accepts; 0 means the CPU */
  weft_infer_shape_fn infer_shape;     /* required */
  weft_infer_type_fn infer_type;       /* optional */
  weft_workspace_fn workspace_size;    /* WEFT_OP_WORKSPACE only */
  weft_compute_fn compute;             /* WEFT_OP_PURE, WEFT_OP_WORKSPACE */
  weft_async_compute_fn compute_async; /* WEFT_OP_ASYNC */
  /* Optional: a registered operator computing the input gradients. It takes the output
   * gradients, then the forward inputs, then the forward outputs, with the forward's attributes,
   * and has one output per forward input. */
  const char* gradient;
  void* user; /* passed to every callback; must stay valid for the life of the process */
} weft_op_def;

/* Registers an operator; usable at once imperatively, in graph JSON, inference, planning and the
 * executor. Fails for a name already taken, a bad definition (naming the field), or a gradient
 * operator that does not exist. Safe while other threads run operators. */
WEFT_C_EXPORT int weft_register_op(const weft_op_def* def);

/* ---- plugins ----------------------------------------------------------------------------------
 */

/* The functions a plugin may call, passed to its entry point (it need not link weft). */
typedef struct {
  uint32_t abi_version;
  uint32_t struct_size;
  const char* (*last_error)(void);
  int (*set_error)(const char* message);
  int (*register_op)(const weft_op_def* def);
  int (*complete)(weft_completion_t done, const char* error);
  int (*current_context)(weft_run_context_t* out);
  int (*attrs_get_string)(const weft_attrs_t* attrs, const char* key, const char** out);
  int (*attrs_get_int)(const weft_attrs_t* attrs, const char* key, int64_t* out);
  int (*attrs_get_float)(const weft_attrs_t* attrs, const char* key, double* out);
  int (*attrs_get_shape)(const weft_attrs_t* attrs, const char* key, int64_t* out, int capacity,
                         int* ndim);
} weft_plugin_api;

/* A plugin exports these two symbols (WEFT_PLUGIN_ABI declares the first):
 *   const uint32_t weft_plugin_abi_version = WEFT_C_ABI_VERSION;
 *   int weft_plugin_init(const weft_plugin_api* api);  -- 0, or -1 after api->set_error()
 */
#ifdef __cplusplus
#define WEFT_PLUGIN_ABI \
  extern "C" WEFT_C_EXPORT const uint32_t weft_plugin_abi_version = WEFT_C_ABI_VERSION
#else
#define WEFT_PLUGIN_ABI WEFT_C_EXPORT const uint32_t weft_plugin_abi_version = WEFT_C_ABI_VERSION
#endif
typedef int (*weft_plugin_init_fn)(const weft_plugin_api* api);

/* Loads a plugin library and runs its entry point. A missing entry point or a different ABI
 * version is an error naming the file and both versions; nothing of the plugin runs then. */
WEFT_C_EXPORT int weft_load_plugin(const char* path);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* WEFT_C_API_H_ */
