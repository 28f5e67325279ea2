/* The C ABI driven from C (compiled with -std=c11 -Wall -Wextra -Werror, linked against
 * libweft_c.so only): the engine, arrays, DLPack round trips, operators, autograd, a graph, the
 * three kinds of foreign operator (an asynchronous one completed from another thread, ones that
 * report errors), plugins, and misuse through the ABI. Expected values are computed here in C.
 *
 *   c_api_test GOOD_PLUGIN.so BAD_VERSION_PLUGIN.so NOT_A_PLUGIN.so
 */
#define _POSIX_C_SOURCE 200809L
#include "weft/c_api.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                            \
    }                                                                          \
  } while (0)
/* A call that must succeed. */
#define OK(call)                                                                               \
  do {                                                                                         \
    if ((call) != 0) {                                                                         \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, weft_last_error()); \
      ++g_failures;                                                                            \
    }                                                                                          \
  } while (0)
/* A call that must fail with a message containing `needle`. */
#define FAILS(call, needle)                                                                  \
  do {                                                                                       \
    if ((call) != -1) {                                                                      \
      fprintf(stderr, "%s:%d: %s succeeded; expected failure\n", __FILE__, __LINE__, #call); \
      ++g_failures;                                                                          \
    } else if (strstr(weft_last_error(), (needle)) == NULL) {                                \
      fprintf(stderr, "%s:%d: %s: message '%s' lacks '%s'\n", __FILE__, __LINE__, #call,     \
              weft_last_error(), (needle));                                                  \
      ++g_failures;                                                                          \
    }                                                                                        \
  } while (0)

static const weft_device_t kCpu = {1, 0};

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static weft_array_t from_floats(const float* v, const int64_t* shape, int ndim) {
  size_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= (size_t)shape[i];
  weft_array_t a = NULL;
  OK(weft_array_from_host(v, n * sizeof(float), shape, ndim, WEFT_FLOAT32, kCpu, &a));
  return a;
}

static void read_floats(weft_array_t a, float* out, size_t n) {
  OK(weft_array_to_host(a, out, n * sizeof(float)));
}

/* ---- engine -----------------------------------------------------------------------------------
 */

typedef struct {
  int* log;
  int* count;
  int value;
} LogStep;

static int log_step(const weft_run_context_t* ctx, void* user) {
  LogStep* s = (LogStep*)user;
  if (ctx->device.type != 1) return weft_set_error("expected a CPU context");
  weft_run_context_t current;
  if (weft_current_context(&current) != 0) return -1;
  if (current.device.type != 1 || current.worker != ctx->worker) {
    return weft_set_error("weft_current_context disagrees with the operation's context");
  }
  sleep_ms(1);
  s->log[(*s->count)++] = s->value;
  return 0;
}

static int g_freed = 0;
static void free_step(void* user) {
  free(user);
  ++g_freed; /* runs once per operation, on whichever thread destroys it */
}

static int fail_op(const weft_run_context_t* ctx, void* user) {
  (void)ctx;
  (void)user;
  return weft_set_error("the foreign operation refuses");
}

static void test_engine(void) {
  weft_var_t v;
  OK(weft_var_new(&v));
  int log[16];
  int count = 0;
  g_freed = 0;
  /* Writes of one variable run in push order, one at a time. */
  for (int i = 0; i < 8; ++i) {
    LogStep* s = (LogStep*)malloc(sizeof(LogStep));
    s->log = log;
    s->count = &count;
    s->value = i;
    OK(weft_push_sync(log_step, s, free_step, kCpu, NULL, 0, &v, 1, 0, "log_step"));
  }
  OK(weft_wait_var(v));
  CHECK(count == 8);
  for (int i = 0; i < count; ++i) CHECK(log[i] == i);
  uint64_t version = 0;
  OK(weft_var_version(v, &version));
  CHECK(version == 8);
  OK(weft_wait_all());
  CHECK(g_freed == 8);

  /* A failing operation: its error reaches the variable's wait, once. */
  OK(weft_push_sync(fail_op, NULL, NULL, kCpu, NULL, 0, &v, 1, 0, "fail_op"));
  FAILS(weft_wait_var(v), "the foreign operation refuses");
  OK(weft_wait_var(v)); /* delivered once */
  /* wait_all reports every failure since the last wait_all, delivered or not, then clears. */
  FAILS(weft_wait_all(), "the foreign operation refuses");
  OK(weft_wait_all());

  /* Outside an operation there is no current context. */
  weft_run_context_t ctx;
  FAILS(weft_current_context(&ctx), "no foreign operation is running");
  OK(weft_var_delete(v));
  FAILS(weft_var_version(v, &version), "");
}

/* An asynchronous operation completed 5 ms later from a thread of its own. */
typedef struct {
  weft_completion_t done;
  int* flag;
  const char* error;
  atomic_int* finished;
} AsyncJob;

static void* async_thread(void* arg) {
  AsyncJob* job = (AsyncJob*)arg;
  sleep_ms(5);
  *job->flag = 1;
  if (weft_complete(job->done, job->error) != 0)
    fprintf(stderr, "complete: %s\n", weft_last_error());
  /* A second call releases nothing and fails. */
  if (weft_complete(job->done, NULL) != -1) {
    fprintf(stderr, "a second weft_complete succeeded\n");
    ++g_failures;
  }
  atomic_store(job->finished, 1);
  free(job);
  return NULL;
}

typedef struct {
  int* flag;
  const char* error;
  atomic_int finished;
} AsyncArgs;

static void async_launch(const weft_run_context_t* ctx, weft_completion_t done, void* user) {
  (void)ctx;
  AsyncArgs* a = (AsyncArgs*)user;
  AsyncJob* job = (AsyncJob*)malloc(sizeof(AsyncJob));
  job->done = done;
  job->flag = a->flag;
  job->error = a->error;
  job->finished = &a->finished;
  pthread_t t;
  pthread_create(&t, NULL, async_thread, job);
  pthread_detach(t);
}

static int check_flag(const weft_run_context_t* ctx, void* user) {
  (void)ctx;
  return *(int*)user == 1 ? 0 : weft_set_error("ran before the asynchronous write completed");
}

static void test_async(void) {
  weft_var_t v;
  OK(weft_var_new(&v));
  int flag = 0;
  AsyncArgs args = {&flag, NULL, 0};
  OK(weft_push_async(async_launch, &args, NULL, kCpu, NULL, 0, &v, 1, 0, "async_write"));
  OK(weft_push_sync(check_flag, &flag, NULL, kCpu, &v, 1, NULL, 0, 0, "reader"));
  OK(weft_wait_var(v));
  CHECK(flag == 1);
  /* The thread's second weft_complete failed there and is reported by the next wait_all. */
  while (atomic_load(&args.finished) == 0) sleep_ms(1);
  FAILS(weft_wait_all(), "completed twice");
  OK(weft_wait_all());

  /* Completed with an error: the error reaches the wait. */
  int flag2 = 0;
  AsyncArgs failing = {&flag2, "the device rejected the launch", 0};
  OK(weft_push_async(async_launch, &failing, NULL, kCpu, NULL, 0, &v, 1, 0, "async_fail"));
  FAILS(weft_wait_var(v), "the device rejected the launch");
  while (atomic_load(&failing.finished) == 0) sleep_ms(1);
  FAILS(weft_wait_all(), "the device rejected the launch");
  OK(weft_wait_all());
  OK(weft_var_delete(v));
}

/* ---- arrays, operators, DLPack ----------------------------------------------------------------
 */

static void test_arrays(void) {
  const int64_t shape[2] = {2, 3};
  const float a_v[6] = {1, -2, 3, -4, 5, -6};
  const float b_v[6] = {10, 20, 30, 40, 50, 60};
  weft_array_t a = from_floats(a_v, shape, 2);
  weft_array_t b = from_floats(b_v, shape, 2);
  const int64_t* s = NULL;
  int ndim = 0;
  OK(weft_array_shape(a, &s, &ndim));
  CHECK(ndim == 2 && s[0] == 2 && s[1] == 3);
  int dtype = -1;
  OK(weft_array_dtype(a, &dtype));
  CHECK(dtype == WEFT_FLOAT32);

  weft_array_t in[2] = {a, b};
  weft_array_t out[4];
  int n = 4;
  OK(weft_invoke("elemwise_add", in, 2, NULL, NULL, 0, out, &n));
  CHECK(n == 1);
  float r[6];
  read_floats(out[0], r, 6);
  for (int i = 0; i < 6; ++i) CHECK(r[i] == a_v[i] + b_v[i]);
  OK(weft_array_free(out[0]));

  const char* keys[1] = {"act_type"};
  const char* vals[1] = {"relu"};
  n = 4;
  OK(weft_invoke("Activation", in, 1, keys, vals, 1, out, &n));
  read_floats(out[0], r, 6);
  for (int i = 0; i < 6; ++i) CHECK(r[i] == (a_v[i] > 0 ? a_v[i] : 0));
  OK(weft_array_free(out[0]));

  /* Misuse of invoke: unknown operator, bad attribute, wrong arity, no room. */
  n = 4;
  FAILS(weft_invoke("no_such_op", in, 2, NULL, NULL, 0, out, &n), "unknown operator 'no_such_op'");
  n = 4;
  const char* bad_vals[1] = {"sigmoidish"};
  FAILS(weft_invoke("Activation", in, 1, keys, bad_vals, 1, out, &n), "act_type");
  n = 4;
  FAILS(weft_invoke("elemwise_add", in, 1, NULL, NULL, 0, out, &n), "expects 2 inputs");
  n = 0;
  FAILS(weft_invoke("elemwise_add", in, 2, NULL, NULL, 0, out, &n), "room for 0");

  /* copy_to */
  weft_array_t c = NULL;
  OK(weft_array_zeros(shape, 2, WEFT_FLOAT32, kCpu, &c));
  OK(weft_array_copy_to(a, c));
  read_floats(c, r, 6);
  for (int i = 0; i < 6; ++i) CHECK(r[i] == a_v[i]);
  OK(weft_array_free(c));
  OK(weft_array_free(a));
  OK(weft_array_free(b));
}

static int g_foreign_deleted = 0;
static void foreign_deleter(DLManagedTensor* self) {
  free(self->dl_tensor.data);
  free(self->dl_tensor.shape);
  free(self);
  ++g_foreign_deleted;
}
static void foreign_deleter_versioned(DLManagedTensorVersioned* self) {
  free(self->dl_tensor.data);
  free(self->dl_tensor.shape);
  free(self);
  ++g_foreign_deleted;
}

/* A tensor owned by "another framework": malloc'ed data and shape, its own deleter. */
static DLManagedTensor* make_foreign(int64_t rows, int64_t cols, float first) {
  DLManagedTensor* t = (DLManagedTensor*)calloc(1, sizeof(DLManagedTensor));
  float* data = (float*)malloc((size_t)(rows * cols) * sizeof(float));
  for (int64_t i = 0; i < rows * cols; ++i) data[i] = first + (float)i;
  int64_t* shape = (int64_t*)malloc(2 * sizeof(int64_t));
  shape[0] = rows;
  shape[1] = cols;
  t->dl_tensor.data = data;
  t->dl_tensor.device.device_type = kDLCPU;
  t->dl_tensor.device.device_id = 0;
  t->dl_tensor.ndim = 2;
  t->dl_tensor.dtype.code = kDLFloat;
  t->dl_tensor.dtype.bits = 32;
  t->dl_tensor.dtype.lanes = 1;
  t->dl_tensor.shape = shape;
  t->deleter = foreign_deleter;
  return t;
}

static void test_dlpack(void) {
  /* Export: zero-copy, the array stays alive until the consumer's deleter call. */
  const int64_t shape[2] = {2, 2};
  const float v[4] = {1, 2, 3, 4};
  weft_array_t a = from_floats(v, shape, 2);
  void* data = NULL;
  OK(weft_array_data(a, &data));
  DLManagedTensor* t = NULL;
  OK(weft_array_to_dlpack(a, &t));
  CHECK(t != NULL && t->dl_tensor.data == data);
  CHECK(t->dl_tensor.ndim == 2 && t->dl_tensor.shape[0] == 2 && t->dl_tensor.shape[1] == 2);
  CHECK(t->dl_tensor.dtype.code == kDLFloat && t->dl_tensor.dtype.bits == 32);
  CHECK(t->dl_tensor.device.device_type == kDLCPU);
  OK(weft_array_free(a)); /* the tensor keeps the storage */
  CHECK(((float*)t->dl_tensor.data)[3] == 4.0f);
  /* Round trip: importing weft's own export is zero-copy too. */
  weft_array_t back = NULL;
  OK(weft_array_from_dlpack(t, &back));
  void* back_data = NULL;
  OK(weft_array_data(back, &back_data));
  CHECK(back_data == data);
  OK(weft_array_free(back));
  OK(weft_wait_all());

  /* Versioned export. */
  weft_array_t a2 = from_floats(v, shape, 2);
  DLManagedTensorVersioned* tv = NULL;
  OK(weft_array_to_dlpack_versioned(a2, &tv));
  CHECK(tv->version.major == 1 && tv->flags == 0);
  tv->deleter(tv);
  OK(weft_array_free(a2));

  /* Import a foreign tensor, compute on it, and check its deleter runs exactly once, after. */
  g_foreign_deleted = 0;
  DLManagedTensor* f = make_foreign(2, 3, 1.0f);
  weft_array_t fa = NULL;
  OK(weft_array_from_dlpack(f, &fa));
  weft_array_t in[2] = {fa, fa};
  weft_array_t out[1];
  int n = 1;
  OK(weft_invoke("elemwise_add", in, 2, NULL, NULL, 0, out, &n));
  OK(weft_array_free(fa)); /* the pending add still holds it */
  float r[6];
  read_floats(out[0], r, 6);
  for (int i = 0; i < 6; ++i) CHECK(r[i] == 2.0f * (1.0f + (float)i));
  OK(weft_array_free(out[0]));
  OK(weft_wait_all());
  CHECK(g_foreign_deleted == 1);

  /* Versioned and read-only: readable, never written. */
  DLManagedTensorVersioned* ro = (DLManagedTensorVersioned*)calloc(1, sizeof *ro);
  DLManagedTensor* tmp = make_foreign(1, 4, 0.0f);
  ro->version.major = 1;
  ro->dl_tensor = tmp->dl_tensor;
  ro->flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  ro->deleter = foreign_deleter_versioned;
  free(tmp);
  weft_array_t roa = NULL;
  OK(weft_array_from_dlpack_versioned(ro, &roa));
  int read_only = 0;
  OK(weft_array_is_read_only(roa, &read_only));
  CHECK(read_only == 1);
  weft_array_t src = NULL;
  const int64_t s14[2] = {1, 4};
  OK(weft_array_zeros(s14, 2, WEFT_FLOAT32, kCpu, &src));
  FAILS(weft_array_copy_to(src, roa), "read-only");
  DLManagedTensorVersioned* again = NULL;
  OK(weft_array_to_dlpack_versioned(roa, &again));
  CHECK((again->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
  again->deleter(again);
  OK(weft_array_free(src));
  OK(weft_array_free(roa));
  OK(weft_wait_all());
  CHECK(g_foreign_deleted == 2);

  /* Misuse: strides, an unsupported device, lanes, a wrong major version. Ownership stays with
   * the caller on failure: the deleter has not run. */
  g_foreign_deleted = 0;
  DLManagedTensor* strided = make_foreign(2, 3, 0.0f);
  int64_t strides[2] = {1, 2}; /* column-major */
  strided->dl_tensor.strides = strides;
  weft_array_t bad = NULL;
  FAILS(weft_array_from_dlpack(strided, &bad), "strided");
  CHECK(bad == NULL);
  strided->dl_tensor.strides = NULL;
  strided->dl_tensor.device.device_type = kDLOpenCL;
  FAILS(weft_array_from_dlpack(strided, &bad), "device type 4");
  strided->dl_tensor.device.device_type = kDLCPU;
  strided->dl_tensor.dtype.lanes = 4;
  FAILS(weft_array_from_dlpack(strided, &bad), "lanes");
  strided->dl_tensor.dtype.lanes = 1;
  strided->dl_tensor.ndim = -1;
  FAILS(weft_array_from_dlpack(strided, &bad), "ndim");
  CHECK(g_foreign_deleted == 0);
  strided->deleter(strided);
  DLManagedTensorVersioned future;
  memset(&future, 0, sizeof future);
  future.version.major = 2;
  FAILS(weft_array_from_dlpack_versioned(&future, &bad), "major version 1");
  FAILS(weft_array_from_dlpack(NULL, &bad), "'tensor' is NULL");
}

/* ---- misuse of handles and codes --------------------------------------------------------------
 */

static void test_misuse(void) {
  const int64_t shape[1] = {4};
  weft_array_t a = NULL;
  FAILS(weft_array_zeros(shape, 1, 99, kCpu, &a), "dtype code 99");
  CHECK(a == NULL);
  FAILS(weft_array_zeros(shape, -3, WEFT_FLOAT32, kCpu, &a), "ndim -3");
  const weft_device_t opencl = {4, 0};
  FAILS(weft_array_zeros(shape, 1, WEFT_FLOAT32, opencl, &a), "device type 4");
  const int64_t negative[1] = {-5};
  FAILS(weft_array_zeros(negative, 1, WEFT_FLOAT32, kCpu, &a), "dimension 0 is -5");
  const int64_t huge[2] = {4611686018427387904LL, 4611686018427387904LL};
  FAILS(weft_array_zeros(huge, 2, WEFT_FLOAT32, kCpu, &a), "");
  const int64_t* s = NULL;
  int ndim = 0;
  FAILS(weft_array_shape(NULL, &s, &ndim), "'array' is NULL");
  FAILS(weft_array_zeros(shape, 1, WEFT_FLOAT32, kCpu, NULL), "'out' is NULL");
  const float v[4] = {1, 2, 3, 4};
  FAILS(weft_array_from_host(v, 8, shape, 1, WEFT_FLOAT32, kCpu, &a), "holds 16 bytes; 8 given");
  /* A pointer that is not a handle: refused by its tag, not followed further. */
  int not_a_handle[8] = {0};
  FAILS(weft_array_dtype((weft_array_t)(void*)not_a_handle, &ndim), "not a live weft array");
  weft_var_t null_var;
  memset(&null_var, 0, sizeof null_var);
  FAILS(weft_wait_var(null_var), "null var");
  FAILS(weft_push_sync(NULL, NULL, NULL, kCpu, NULL, 0, NULL, 0, 0, "x"), "'fn' is NULL");
  FAILS(weft_push_sync(fail_op, NULL, NULL, kCpu, NULL, 3, NULL, 0, 0, "x"), "'reads' is NULL");
  FAILS(weft_graph_load_json("{not json", 9, NULL), "'out' is NULL");
  weft_graph_t g = NULL;
  FAILS(weft_graph_load_json("{not json", 9, &g), "");
  CHECK(g == NULL);
  FAILS(weft_graph_load_file("/no/such/file.json", &g), "/no/such/file.json");
  FAILS(weft_executor_forward(NULL, 0), "'exec' is NULL");
  OK(weft_array_free(NULL));
}

/* ---- foreign operators ------------------------------------------------------------------------
 */

static int same_shape(const weft_attrs_t* attrs, int num_inputs, const int64_t* const* in_shapes,
                      const int* in_ndims, int num_outputs, int64_t* out_shapes, int* out_ndims,
                      void* user) {
  (void)attrs;
  (void)user;
  for (int i = 1; i < num_inputs; ++i) {
    if (in_ndims[i] != in_ndims[0]) return weft_set_error("inputs differ in rank");
    for (int d = 0; d < in_ndims[0]; ++d) {
      if (in_shapes[i][d] != in_shapes[0][d]) return weft_set_error("inputs differ in shape");
    }
  }
  for (int o = 0; o < num_outputs; ++o) {
    out_ndims[o] = in_ndims[0];
    for (int d = 0; d < in_ndims[0]; ++d) out_shapes[o * WEFT_MAX_NDIM + d] = in_shapes[0][d];
  }
  return 0;
}

static int64_t numel(const DLTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

/* Pure: out = alpha * a + b. */
static int scale_add(const weft_op_call_t* call, void* user) {
  (void)user;
  double alpha = 0;
  if (weft_attrs_get_float(call->attrs, "alpha", &alpha) != 0) return -1;
  const float* a = (const float*)call->inputs[0].data;
  const float* b = (const float*)call->inputs[1].data;
  float* out = (float*)call->outputs[0].data;
  const int64_t n = numel(&call->outputs[0]);
  for (int64_t i = 0; i < n; ++i) {
    const float v = (float)alpha * a[i] + b[i];
    out[i] = call->req[0] == WEFT_REQ_ADD ? out[i] + v : v;
  }
  return 0;
}

/* Its gradient: inputs (out_grad, a, b, out) -> (alpha * out_grad, out_grad). */
static int scale_add_grad_shape(const weft_attrs_t* attrs, int num_inputs,
                                const int64_t* const* in_shapes, const int* in_ndims,
                                int num_outputs, int64_t* out_shapes, int* out_ndims, void* user) {
  return same_shape(attrs, num_inputs, in_shapes, in_ndims, num_outputs, out_shapes, out_ndims,
                    user);
}
static int scale_add_grad(const weft_op_call_t* call, void* user) {
  (void)user;
  double alpha = 0;
  if (weft_attrs_get_float(call->attrs, "alpha", &alpha) != 0) return -1;
  const float* og = (const float*)call->inputs[0].data;
  const int64_t n = numel(&call->inputs[0]);
  for (int o = 0; o < 2; ++o) {
    float* g = (float*)call->outputs[o].data;
    const float k = o == 0 ? (float)alpha : 1.0f;
    for (int64_t i = 0; i < n; ++i) {
      g[i] = call->req[o] == WEFT_REQ_ADD ? g[i] + k * og[i] : k * og[i];
    }
  }
  return 0;
}

/* With workspace: row sums of a 2-D input, staged through the scratch buffer. */
static int rowsum_shape(const weft_attrs_t* attrs, int num_inputs, const int64_t* const* in_shapes,
                        const int* in_ndims, int num_outputs, int64_t* out_shapes, int* out_ndims,
                        void* user) {
  (void)attrs;
  (void)num_inputs;
  (void)num_outputs;
  (void)user;
  if (in_ndims[0] != 2) return weft_set_error("rowsum takes a 2-D input");
  out_ndims[0] = 1;
  out_shapes[0] = in_shapes[0][0];
  return 0;
}
static int rowsum_workspace(const weft_attrs_t* attrs, int num_inputs,
                            const int64_t* const* in_shapes, const int* in_ndims, size_t* bytes,
                            void* user) {
  (void)attrs;
  (void)num_inputs;
  (void)in_ndims;
  (void)user;
  *bytes = (size_t)in_shapes[0][0] * sizeof(double);
  return 0;
}
static int rowsum(const weft_op_call_t* call, void* user) {
  (void)user;
  const int64_t rows = call->inputs[0].shape[0];
  const int64_t cols = call->inputs[0].shape[1];
  if (call->workspace == NULL || call->workspace_bytes < (size_t)rows * sizeof(double)) {
    return weft_set_error("rowsum: the workspace is missing or too small");
  }
  double* acc = (double*)call->workspace;
  const float* x = (const float*)call->inputs[0].data;
  for (int64_t r = 0; r < rows; ++r) {
    acc[r] = 0;
    for (int64_t c = 0; c < cols; ++c) acc[r] += x[r * cols + c];
  }
  float* out = (float*)call->outputs[0].data;
  for (int64_t r = 0; r < rows; ++r) out[r] = (float)acc[r];
  return 0;
}

/* Asynchronous: out = -in, computed on a thread of its own, completed from there. */
typedef struct {
  const float* in;
  float* out;
  int64_t n;
  weft_completion_t done;
  int fail;
} NegJob;
static void* neg_thread(void* arg) {
  NegJob* job = (NegJob*)arg;
  sleep_ms(2);
  for (int64_t i = 0; i < job->n; ++i) job->out[i] = -job->in[i];
  weft_complete(job->done, job->fail ? "the asynchronous kernel failed on its device" : NULL);
  free(job);
  return NULL;
}
static void async_neg(const weft_op_call_t* call, weft_completion_t done, void* user) {
  NegJob* job = (NegJob*)malloc(sizeof(NegJob));
  job->in = (const float*)call->inputs[0].data;
  job->out = (float*)call->outputs[0].data;
  job->n = numel(&call->inputs[0]);
  job->done = done;
  job->fail = user != NULL;
  pthread_t t;
  pthread_create(&t, NULL, neg_thread, job);
  pthread_detach(t);
}

static int failing_compute(const weft_op_call_t* call, void* user) {
  (void)call;
  (void)user;
  return weft_set_error("c_fail: the kernel refuses this input");
}

static weft_op_def base_def(const char* name, int nin, int nout) {
  weft_op_def d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.name = name;
  d.num_inputs = nin;
  d.num_outputs = nout;
  d.infer_shape = same_shape;
  return d;
}

static int g_fail_marker = 1;

static void register_ops(void) {
  static const weft_attr_def alpha[1] = {{"alpha", "float", "1.0", "scale of the first input"}};
  static const char* const ab[2] = {"a", "b"};
  weft_op_def g = base_def("c_scale_add_grad", 4, 2);
  g.attrs = alpha;
  g.num_attrs = 1;
  g.infer_shape = scale_add_grad_shape;
  g.compute = scale_add_grad;
  OK(weft_register_op(&g));

  weft_op_def d = base_def("c_scale_add", 2, 1);
  d.description = "alpha * a + b, from C";
  d.input_names = ab;
  d.attrs = alpha;
  d.num_attrs = 1;
  d.compute = scale_add;
  d.gradient = "c_scale_add_grad";
  OK(weft_register_op(&d));

  weft_op_def w = base_def("c_rowsum", 1, 1);
  w.kind = WEFT_OP_WORKSPACE;
  w.infer_shape = rowsum_shape;
  w.workspace_size = rowsum_workspace;
  w.compute = rowsum;
  OK(weft_register_op(&w));

  weft_op_def n = base_def("c_async_neg", 1, 1);
  n.kind = WEFT_OP_ASYNC;
  n.compute_async = async_neg;
  OK(weft_register_op(&n));
  weft_op_def nf = n;
  nf.name = "c_async_neg_fail";
  nf.user = &g_fail_marker;
  OK(weft_register_op(&nf));

  weft_op_def f = base_def("c_fail", 1, 1);
  f.compute = failing_compute;
  OK(weft_register_op(&f));

  /* Bad definitions: each refused with the field named. */
  weft_op_def bad = d;
  FAILS(weft_register_op(&bad), "already registered");
  bad.name = "c_bad1";
  bad.struct_size = 8;
  FAILS(weft_register_op(&bad), "struct_size");
  bad = d;
  bad.name = "c_bad2";
  bad.compute = NULL;
  FAILS(weft_register_op(&bad), "compute is NULL");
  bad = d;
  bad.name = "c_bad3";
  static const weft_attr_def weird[1] = {{"k", "complex", NULL, NULL}};
  bad.attrs = weird;
  FAILS(weft_register_op(&bad), "type 'complex'");
  bad = d;
  bad.name = "c_bad4";
  static const weft_attr_def bad_default[1] = {{"alpha", "float", "fast", NULL}};
  bad.attrs = bad_default;
  FAILS(weft_register_op(&bad), "default 'fast'");
  bad = d;
  bad.name = "c_bad5";
  bad.gradient = "c_no_such_gradient";
  FAILS(weft_register_op(&bad), "c_no_such_gradient");
  bad = d;
  bad.name = "c bad name";
  FAILS(weft_register_op(&bad), "names use");
  bad = d;
  bad.name = "c_bad6";
  bad.kind = 7;
  FAILS(weft_register_op(&bad), "kind 7");
  int exists = 1;
  OK(weft_op_exists("c_bad2", &exists));
  CHECK(exists == 0);
  OK(weft_op_exists("c_scale_add", &exists));
  CHECK(exists == 1);
}

static void test_foreign_ops(void) {
  register_ops();
  const int64_t shape[2] = {2, 3};
  const float a_v[6] = {1, 2, 3, 4, 5, 6};
  const float b_v[6] = {0.5f, 0.25f, 0, -1, -2, -3};
  weft_array_t a = from_floats(a_v, shape, 2);
  weft_array_t b = from_floats(b_v, shape, 2);
  weft_array_t in[2] = {a, b};
  weft_array_t out[2];
  float r[6];

  /* Pure, with an attribute and its default. */
  const char* keys[1] = {"alpha"};
  const char* vals[1] = {"2.5"};
  int n = 2;
  OK(weft_invoke("c_scale_add", in, 2, keys, vals, 1, out, &n));
  CHECK(n == 1);
  read_floats(out[0], r, 6);
  for (int i = 0; i < 6; ++i) CHECK(r[i] == 2.5f * a_v[i] + b_v[i]);
  OK(weft_array_free(out[0]));
  n = 2;
  OK(weft_invoke("c_scale_add", in, 2, NULL, NULL, 0, out, &n));
  read_floats(out[0], r, 6);
  for (int i = 0; i < 6; ++i) CHECK(r[i] == a_v[i] + b_v[i]);
  OK(weft_array_free(out[0]));
  /* Attribute errors name the operator and the attribute. */
  const char* bad_vals[1] = {"lots"};
  n = 2;
  FAILS(weft_invoke("c_scale_add", in, 2, keys, bad_vals, 1, out, &n), "alpha");
  const char* unknown_keys[1] = {"beta"};
  n = 2;
  FAILS(weft_invoke("c_scale_add", in, 2, unknown_keys, vals, 1, out, &n),
        "unknown attribute 'beta'");
  /* Shape inference errors from the callback. */
  const int64_t other_shape[2] = {3, 2};
  weft_array_t c = from_floats(a_v, other_shape, 2);
  weft_array_t mixed[2] = {a, c};
  n = 2;
  FAILS(weft_invoke("c_scale_add", mixed, 2, NULL, NULL, 0, out, &n), "inputs differ in shape");
  OK(weft_array_free(c));

  /* Workspace kind. */
  n = 2;
  OK(weft_invoke("c_rowsum", in, 1, NULL, NULL, 0, out, &n));
  read_floats(out[0], r, 2);
  CHECK(r[0] == 6.0f && r[1] == 15.0f);
  OK(weft_array_free(out[0]));

  /* Asynchronous kind, chained: a later operator reads what the other thread wrote. */
  n = 2;
  OK(weft_invoke("c_async_neg", in, 1, NULL, NULL, 0, out, &n));
  weft_array_t neg = out[0];
  weft_array_t chain[2] = {neg, b};
  n = 2;
  OK(weft_invoke("elemwise_add", chain, 2, NULL, NULL, 0, out, &n));
  read_floats(out[0], r, 6);
  for (int i = 0; i < 6; ++i) CHECK(r[i] == -a_v[i] + b_v[i]);
  OK(weft_array_free(out[0]));
  OK(weft_array_free(neg));

  /* Errors: the asynchronous kernel's and the synchronous kernel's reach the next wait. */
  n = 2;
  OK(weft_invoke("c_async_neg_fail", in, 1, NULL, NULL, 0, out, &n));
  FAILS(weft_array_wait_to_read(out[0]), "failed on its device");
  OK(weft_array_free(out[0]));
  n = 2;
  OK(weft_invoke("c_fail", in, 1, NULL, NULL, 0, out, &n));
  FAILS(weft_array_wait_to_read(out[0]), "the kernel refuses this input");
  OK(weft_array_free(out[0]));
  FAILS(weft_wait_all(), "2 operations failed");
  OK(weft_wait_all());

  /* Autograd through the registered gradient: d/da = alpha, d/db = 1. */
  OK(weft_array_attach_grad(a, WEFT_GRAD_WRITE));
  OK(weft_array_attach_grad(b, WEFT_GRAD_WRITE));
  int prev = 0;
  OK(weft_autograd_set_recording(1, &prev));
  CHECK(prev == 0);
  const char* three[1] = {"3"};
  n = 2;
  OK(weft_invoke("c_scale_add", in, 2, keys, three, 1, out, &n));
  OK(weft_autograd_set_recording(0, NULL));
  OK(weft_array_backward(out[0], NULL));
  weft_array_t ga = NULL, gb = NULL;
  OK(weft_array_grad(a, &ga));
  OK(weft_array_grad(b, &gb));
  read_floats(ga, r, 6);
  for (int i = 0; i < 6; ++i) CHECK(r[i] == 3.0f);
  read_floats(gb, r, 6);
  for (int i = 0; i < 6; ++i) CHECK(r[i] == 1.0f);
  OK(weft_array_free(ga));
  OK(weft_array_free(gb));
  OK(weft_array_free(out[0]));
  OK(weft_array_free(a));
  OK(weft_array_free(b));
}

/* The registry's schema as JSON, for a built-in and a foreign operator (C has no JSON parser:
 * the checks look for the members' text, as json.dumps-like compact output writes them). */
static void test_op_schema(void) {
  const char* json = NULL;
  OK(weft_op_schema("Convolution", &json));
  CHECK(json != NULL && strstr(json, "\"inputs\":[\"data\",\"weight\",\"bias\"]") != NULL);
  CHECK(json != NULL && strstr(json, "\"name\":\"num_group\"") != NULL);
  OK(weft_op_schema("concat", &json)); /* an alias */
  CHECK(json != NULL && strstr(json, "\"name\":\"Concat\"") != NULL);
  CHECK(json != NULL && strstr(json, "\"variadic\":\"num_args\"") != NULL);
  OK(weft_op_schema("c_scale_add", &json));
  CHECK(json != NULL && strstr(json, "\"inputs\":[\"a\",\"b\"]") != NULL);
  CHECK(json != NULL && strstr(json, "\"default\":1.0") != NULL);
  CHECK(json != NULL && strstr(json, "scale of the first input") != NULL);
  CHECK(json != NULL && strstr(json, "\"runtime\":true") != NULL);
  OK(weft_op_schema(NULL, &json));
  CHECK(json != NULL && json[0] == '[' && strstr(json, "\"name\":\"c_scale_add\"") != NULL);
  json = "untouched";
  FAILS(weft_op_schema("no_such_op", &json), "no_such_op");
  CHECK(json == NULL);
  FAILS(weft_op_schema("Convolution", NULL), "json_out");
}

/* ---- graphs -----------------------------------------------------------------------------------
 */

/* y = c_scale_add(FullyConnected(x, w, b; 2 hidden), z; alpha = 2): built-in and foreign nodes. */
static const char* kGraph =
    "{\"nodes\": ["
    "{\"op\": \"null\", \"name\": \"x\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc_weight\", \"inputs\": []},"
    "{\"op\": \"null\", \"name\": \"fc_bias\", \"inputs\": []},"
    "{\"op\": \"FullyConnected\", \"name\": \"fc\", \"attrs\": {\"num_hidden\": \"2\"},"
    " \"inputs\": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},"
    "{\"op\": \"null\", \"name\": \"z\", \"inputs\": []},"
    "{\"op\": \"c_scale_add\", \"name\": \"mix\", \"attrs\": {\"alpha\": \"2\"},"
    " \"inputs\": [[3, 0, 0], [4, 0, 0]]}],"
    "\"arg_nodes\": [0, 1, 2, 4], \"node_row_ptr\": [0, 1, 2, 3, 4, 5, 6],"
    "\"heads\": [[5, 0, 0]], \"attrs\": {\"mxnet_version\": [\"int\", 10901]}}";

static void test_graph(void) {
  weft_graph_t g = NULL;
  OK(weft_graph_load_json(kGraph, strlen(kGraph), &g));
  const char* names[2] = {"x", "z"};
  const int64_t xs[2] = {3, 4};
  const int64_t zs[2] = {3, 2};
  const int64_t* shapes[2] = {xs, zs};
  const int ndims[2] = {2, 2};
  weft_executor_t e = NULL;
  OK(weft_executor_bind(g, kCpu, names, shapes, ndims, 2, WEFT_GRAD_WRITE, &e));
  float x[12], w[8], bias[2], z[6];
  for (int i = 0; i < 12; ++i) x[i] = 0.1f * (float)(i - 5);
  for (int i = 0; i < 8; ++i) w[i] = 0.2f * (float)(i % 3) - 0.1f;
  bias[0] = 0.5f;
  bias[1] = -0.25f;
  for (int i = 0; i < 6; ++i) z[i] = (float)i;
  const int64_t ws[2] = {2, 4};
  const int64_t bs[1] = {2};
  weft_array_t xa = from_floats(x, xs, 2), wa = from_floats(w, ws, 2),
               ba = from_floats(bias, bs, 1), za = from_floats(z, zs, 2);
  OK(weft_executor_set_arg(e, "x", xa));
  OK(weft_executor_set_arg(e, "fc_weight", wa));
  OK(weft_executor_set_arg(e, "fc_bias", ba));
  OK(weft_executor_set_arg(e, "z", za));
  FAILS(weft_executor_set_arg(e, "fc_weights", wa), "no argument or auxiliary state 'fc_weights'");
  FAILS(weft_executor_set_arg(e, "z", xa), "bound as");
  OK(weft_executor_forward(e, 1));
  int nout = 0;
  OK(weft_executor_num_outputs(e, &nout));
  CHECK(nout == 1);
  weft_array_t y = NULL;
  OK(weft_executor_output(e, 0, &y));
  float yv[6];
  read_floats(y, yv, 6);
  for (int r = 0; r < 3; ++r) {
    for (int h = 0; h < 2; ++h) {
      double fc = bias[h];
      for (int k = 0; k < 4; ++k) fc += (double)x[r * 4 + k] * w[h * 4 + k];
      const double want = 2.0 * fc + z[r * 2 + h];
      CHECK(fabs(yv[r * 2 + h] - want) <= 1e-5 * (1.0 + fabs(want)));
    }
  }
  /* Backward with ones: dL/dw[h][k] = 2 * sum_r x[r][k]; dL/dz = 1. */
  OK(weft_executor_backward(e, NULL, 0));
  weft_array_t gw = NULL, gz = NULL;
  OK(weft_executor_grad(e, "fc_weight", &gw));
  OK(weft_executor_grad(e, "z", &gz));
  float gwv[8], gzv[6];
  read_floats(gw, gwv, 8);
  read_floats(gz, gzv, 6);
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 4; ++k) {
      double want = 0;
      for (int r = 0; r < 3; ++r) want += 2.0 * x[r * 4 + k];
      CHECK(fabs(gwv[h * 4 + k] - want) <= 1e-5 * (1.0 + fabs(want)));
    }
  }
  for (int i = 0; i < 6; ++i) CHECK(gzv[i] == 1.0f);
  FAILS(weft_executor_output(e, 5, &y), "out of range");
  OK(weft_array_free(gw));
  OK(weft_array_free(gz));
  OK(weft_array_free(y));
  OK(weft_array_free(xa));
  OK(weft_array_free(wa));
  OK(weft_array_free(ba));
  OK(weft_array_free(za));
  OK(weft_executor_free(e));
  OK(weft_graph_free(g));

  /* A graph naming an operator nobody registered. */
  const char* unknown =
      "{\"nodes\": [{\"op\": \"null\", \"name\": \"x\", \"inputs\": []},"
      "{\"op\": \"c_not_registered\", \"name\": \"n\", \"inputs\": [[0, 0, 0]]}],"
      "\"arg_nodes\": [0], \"heads\": [[1, 0, 0]]}";
  FAILS(weft_graph_load_json(unknown, strlen(unknown), &g), "c_not_registered");
}

/* ---- plugins ----------------------------------------------------------------------------------
 */

static void test_plugins(const char* good, const char* bad_version, const char* not_plugin) {
  OK(weft_load_plugin(good));
  OK(weft_load_plugin(good)); /* a second load is a no-op */
  int exists = 0;
  OK(weft_op_exists("plugin_double", &exists));
  CHECK(exists == 1);
  const int64_t shape[1] = {3};
  const float v[3] = {1, -2, 0.5f};
  weft_array_t a = from_floats(v, shape, 1);
  weft_array_t out[1];
  int n = 1;
  OK(weft_invoke("plugin_double", &a, 1, NULL, NULL, 0, out, &n));
  float r[3];
  read_floats(out[0], r, 3);
  for (int i = 0; i < 3; ++i) CHECK(r[i] == 2 * v[i]);
  OK(weft_array_free(out[0]));
  OK(weft_array_free(a));

  FAILS(weft_load_plugin(bad_version), "built for weft C ABI version 999");
  OK(weft_op_exists("plugin_never_registered", &exists));
  CHECK(exists == 0);
  FAILS(weft_load_plugin(not_plugin), "is not a weft plugin");
  FAILS(weft_load_plugin("/no/such/plugin.so"), "could not be loaded");
  FAILS(weft_load_plugin(NULL), "'path' is NULL");
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s GOOD_PLUGIN BAD_VERSION_PLUGIN NOT_A_PLUGIN\n", argv[0]);
    return 2;
  }
  CHECK(weft_abi_version() == WEFT_C_ABI_VERSION);
  CHECK(strlen(weft_version()) > 0);
  test_engine();
  test_async();
  test_arrays();
  test_dlpack();
  test_misuse();
  test_foreign_ops();
  test_op_schema();
  test_graph();
  test_plugins(argv[1], argv[2], argv[3]);
  OK(weft_wait_all());
  if (g_failures != 0) {
    fprintf(stderr, "c_api_test: %d check(s) failed\n", g_failures);
    return 1;
  }
  printf("c_api_test: all checks passed\n");
  return 0;
}
