// DLPack exchange of NDArrays for C++ callers (the Python package, the C ABI, embedders): zero-copy
// both ways, for DLManagedTensor (DLPack 0.6) and DLManagedTensorVersioned (1.x). The C ABI's
// weft_array_{to,from}_dlpack* wrap these. Semantics in docs/C_API.md, "DLPack".
#pragma once

#include "ndarray/ndarray.h"
// Only for DLPack's types: dlpack/dlpack.h, and DLManagedTensorVersioned where the installed
// DLPack (0.x) lacks it; the header declares them once for every layer.
#include "weft/c_api.h"

namespace weft {

/// Exports `array` without copying, after waiting for its pending reads and writes (the consumer
/// may read and write the memory at once). The tensor keeps the storage alive until its deleter
/// is called. Compact row-major: `strides` is NULL.
DLManagedTensor* to_dlpack(const NDArray& array);
/// As to_dlpack, versioned (1.0); a read-only array sets DLPACK_FLAG_BITMASK_READ_ONLY.
DLManagedTensorVersioned* to_dlpack_versioned(const NDArray& array);

/// Wraps a producer's tensor without copying. On success weft owns `tensor` and calls its deleter
/// exactly once, after the last operation on the array (and its views) has completed. On failure
/// (ValueError or NotImplemented naming the reason: strided, lanes, ndim, device, NULL data,
/// misalignment) nothing is taken: the caller still owns `tensor`.
NDArray from_dlpack(DLManagedTensor* tensor);
/// As from_dlpack; a major version other than 1 is refused, and a read-only tensor gives a
/// read-only array (operators refuse to write it).
NDArray from_dlpack_versioned(DLManagedTensorVersioned* tensor);

}  // namespace weft
