// `weft_ffi_bench --breakdown`: the C ABI's extra cost per push, step by step (ffi_breakdown.cc).
#pragma once

#include "bench/ffi/ffi_capi_side.h"

namespace weft::bench::ffi {

/// Times native pushes on the Runtime's engine that add weft_push_sync's steps one at a time,
/// then weft_push_sync itself, with the `workers` CPU workers held during each push loop; prints
/// '#' lines. Call from one thread; returns 0.
int run_breakdown(const Sizes& sizes, int workers);

}  // namespace weft::bench::ffi
