// Helpers for writing shape/type inference and kernels: merging partially known shapes with clear
// errors, the common inference rules, axis normalisation, and an OpenMP parallel loop.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/op.h"

namespace weft {

/// Merges `value` into `*slot`: unknown rank/dims take the other's; known ones must agree.
/// Returns false on a contradiction (nothing thrown).
bool merge_shape(Shape* slot, const Shape& value);

/// Merges `value` into `shapes[i]`; throws ShapeError naming the op, node, which side ("input" /
/// "output"), its name when the op lists names, and both shapes on a contradiction.
void assign_input_shape(const OpAttrs& attrs, std::vector<Shape>& shapes, int i,
                        const Shape& value);
void assign_output_shape(const OpAttrs& attrs, std::vector<Shape>& shapes, int i,
                         const Shape& value);
void assign_input_type(const OpAttrs& attrs, std::vector<DType>& types, int i, DType value);
void assign_output_type(const OpAttrs& attrs, std::vector<DType>& types, int i, DType value);

/// True when every shape in `shapes` is known.
bool all_known(const std::vector<Shape>& shapes);

/// FInferShape for ops whose inputs and outputs all have one shape (elementwise).
bool infer_same_shape(const OpAttrs& attrs, std::vector<Shape>& in, std::vector<Shape>& out);

/// Normalises an axis in [-ndim, ndim) to [0, ndim); throws ValueError naming the op otherwise.
int normalize_axis(const OpAttrs& attrs, int64_t axis, int ndim);

/// Throws ShapeError "<op (node)>: <message>" with a formatted message.
[[noreturn]] void throw_shape_error(const OpAttrs& attrs, const std::string& message);

/// omp_get_thread_num without including omp.h in every translation unit.
int omp_get_thread_num_compat();

/// Runs body(begin, end) over [0, n) split into chunks of at least `grain` items across up to
/// `threads` OpenMP threads (inline when one chunk or one thread). Without OpenMP (WEFT_USE_OPENMP
/// off, or a translation unit compiled without -fopenmp) the same chunks run one after another on
/// the calling thread: the pragma is ignored there, so the chunk loop must not depend on it.
template <typename F>
void parallel_for(int64_t n, int64_t grain, int threads, F&& body) {
  if (n <= 0) return;
  const int64_t max_chunks = grain > 0 ? (n + grain - 1) / grain : n;
  const int nt = static_cast<int>(std::min<int64_t>(threads, max_chunks));
  if (nt <= 1) {
    body(int64_t{0}, n);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
  {
    const int64_t t = omp_get_thread_num_compat();
    const int64_t begin = n * t / nt;
    const int64_t end = n * (t + 1) / nt;
    if (begin < end) body(begin, end);
  }
#else
  for (int64_t t = 0; t < nt; ++t) {
    const int64_t begin = n * t / nt;
    const int64_t end = n * (t + 1) / nt;
    if (begin < end) body(begin, end);
  }
#endif
}

}  // namespace weft
