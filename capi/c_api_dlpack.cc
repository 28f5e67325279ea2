// The C ABI: DLPack exchange, zero-copy both ways (DLManagedTensor of DLPack 0.6 and the
// versioned DLManagedTensorVersioned of DLPack 1.x), over ndarray/dlpack.h. See docs/C_API.md,
// "DLPack".
#include "capi/c_api_internal.h"
#include "ndarray/dlpack.h"

using namespace weft;        // NOLINT(google-build-using-namespace)
using namespace weft::capi;  // NOLINT(google-build-using-namespace)

extern "C" {

int weft_array_to_dlpack(weft_array_t array, DLManagedTensor** out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = to_dlpack(array_of(array, "array").array);
  WEFT_C_END("weft_array_to_dlpack")
}

int weft_array_to_dlpack_versioned(weft_array_t array, DLManagedTensorVersioned** out) {
  WEFT_C_BEGIN
  require(out, "out");
  *out = to_dlpack_versioned(array_of(array, "array").array);
  WEFT_C_END("weft_array_to_dlpack_versioned")
}

int weft_array_from_dlpack(DLManagedTensor* tensor, weft_array_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  require(tensor, "tensor");
  *out = nullptr;
  *out = new_array_handle(from_dlpack(tensor));
  WEFT_C_END("weft_array_from_dlpack")
}

int weft_array_from_dlpack_versioned(DLManagedTensorVersioned* tensor, weft_array_t* out) {
  WEFT_C_BEGIN
  require(out, "out");
  require(tensor, "tensor");
  *out = nullptr;
  *out = new_array_handle(from_dlpack_versioned(tensor));
  WEFT_C_END("weft_array_from_dlpack_versioned")
}

}  // extern "C"
