/* A plugin built for another C ABI version: weft must refuse it before running anything. */
#include <string.h>

#include "weft/c_api.h"

WEFT_C_EXPORT const uint32_t weft_plugin_abi_version = 999;

static int never(const weft_attrs_t* attrs, int num_inputs, const int64_t* const* in_shapes,
                 const int* in_ndims, int num_outputs, int64_t* out_shapes, int* out_ndims,
                 void* user) {
  (void)attrs, (void)num_inputs, (void)in_shapes, (void)in_ndims, (void)num_outputs;
  (void)out_shapes, (void)out_ndims, (void)user;
  return -1;
}
static int never_compute(const weft_op_call_t* call, void* user) {
  (void)call, (void)user;
  return -1;
}

WEFT_C_EXPORT int weft_plugin_init(const weft_plugin_api* api) {
  weft_op_def d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.name = "plugin_never_registered";
  d.num_inputs = 1;
  d.num_outputs = 1;
  d.infer_shape = never;
  d.compute = never_compute;
  return api->register_op(&d);
}
