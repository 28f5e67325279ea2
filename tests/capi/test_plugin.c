/* A plugin for the C ABI test: registers `plugin_double` (out = 2 * in) through the function
 * table it is handed; it links nothing of weft. */
#include <string.h>

#include "weft/c_api.h"

WEFT_PLUGIN_ABI;

static const weft_plugin_api* g_api = NULL;

static int same_shape(const weft_attrs_t* attrs, int num_inputs, const int64_t* const* in_shapes,
                      const int* in_ndims, int num_outputs, int64_t* out_shapes, int* out_ndims,
                      void* user) {
  (void)attrs;
  (void)num_inputs;
  (void)num_outputs;
  (void)user;
  out_ndims[0] = in_ndims[0];
  for (int d = 0; d < in_ndims[0]; ++d) out_shapes[d] = in_shapes[0][d];
  return 0;
}

static int double_it(const weft_op_call_t* call, void* user) {
  (void)user;
  if (call->inputs[0].dtype.code != kDLFloat || call->inputs[0].dtype.bits != 32) {
    return g_api->set_error("plugin_double takes float32");
  }
  int64_t n = 1;
  for (int i = 0; i < call->inputs[0].ndim; ++i) n *= call->inputs[0].shape[i];
  const float* in = (const float*)call->inputs[0].data;
  float* out = (float*)call->outputs[0].data;
  for (int64_t i = 0; i < n; ++i) out[i] = 2 * in[i];
  return 0;
}

WEFT_C_EXPORT int weft_plugin_init(const weft_plugin_api* api) {
  if (api->struct_size < sizeof(weft_plugin_api)) return -1;
  g_api = api;
  weft_op_def d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.name = "plugin_double";
  d.description = "2 * data (from the test plugin)";
  d.num_inputs = 1;
  d.num_outputs = 1;
  d.infer_shape = same_shape;
  d.compute = double_it;
  return api->register_op(&d);
}
