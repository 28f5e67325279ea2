// The strided copy and zero fill every CPU shape kernel shares (ops/cpu/strided_copy.h).
#include "ops/cpu/strided_copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/infer_util.h"

namespace weft::detail {

namespace {

// ---- strided copy --------------------------------------------------------------------------

// Dims after dropping size-1 dims and merging neighbours that are contiguous on both sides.
struct CopyLayout {
  std::vector<int64_t> shape, dst, src;
  int parallel_dims = 0;  // leading dims split across threads (never dims that dst repeats)
};

CopyLayout coalesce(const int64_t* dst_strides, const int64_t* src_strides, const int64_t* shape,
                    int ndim) {
  CopyLayout l;
  for (int k = 0; k < ndim; ++k) {
    if (shape[k] == 1) continue;
    if (!l.shape.empty() && l.dst.back() == dst_strides[k] * shape[k] &&
        l.src.back() == src_strides[k] * shape[k]) {
      l.shape.back() *= shape[k];
      l.dst.back() = dst_strides[k];
      l.src.back() = src_strides[k];
    } else {
      l.shape.push_back(shape[k]);
      l.dst.push_back(dst_strides[k]);
      l.src.push_back(src_strides[k]);
    }
  }
  if (l.shape.empty()) {
    l.shape = {1};
    l.dst = {1};
    l.src = {1};
  }
  const int nd = static_cast<int>(l.shape.size());
  l.parallel_dims = nd - 1;
  for (int k = 0; k < nd; ++k) {
    if (l.dst[k] == 0) {  // dst repeats along k: threads must not share a block that includes k
      l.parallel_dims = std::min(l.parallel_dims, k);
      break;
    }
  }
  return l;
}

template <typename T, bool kAdd>
void run_strided(T* dst, const T* src, const CopyLayout& l, int num_threads) {
  const int nd = static_cast<int>(l.shape.size());
  const int64_t inner = l.shape[nd - 1], dsi = l.dst[nd - 1], ssi = l.src[nd - 1];
  int64_t units = 1, per_unit = 1;
  for (int k = 0; k < nd - 1; ++k) (k < l.parallel_dims ? units : per_unit) *= l.shape[k];
  const int64_t grain =
      std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, inner * per_unit));
  parallel_for(units, grain, num_threads, [&](int64_t ub, int64_t ue) {
    std::vector<int64_t> idx(nd, 0);
    int64_t doff = 0, soff = 0, rem = ub * per_unit;
    for (int k = nd - 2; k >= 0; --k) {
      idx[k] = rem % l.shape[k];
      rem /= l.shape[k];
      doff += idx[k] * l.dst[k];
      soff += idx[k] * l.src[k];
    }
    for (int64_t o = ub * per_unit, end = ue * per_unit; o < end; ++o) {
      T* d = dst + doff;
      const T* s = src + soff;
      if constexpr (kAdd) {
        if (dsi == 1 && ssi == 1) {
          for (int64_t j = 0; j < inner; ++j) d[j] = static_cast<T>(d[j] + s[j]);
        } else if (dsi == 0) {
          T acc = d[0];
          for (int64_t j = 0; j < inner; ++j) acc = static_cast<T>(acc + s[j * ssi]);
          d[0] = acc;
        } else {
          for (int64_t j = 0; j < inner; ++j) d[j * dsi] = static_cast<T>(d[j * dsi] + s[j * ssi]);
        }
      } else {
        if (dsi == 1 && ssi == 1) {
          std::memcpy(d, s, static_cast<size_t>(inner) * sizeof(T));
        } else if (ssi == 0) {
          const T v = *s;
          for (int64_t j = 0; j < inner; ++j) d[j * dsi] = v;
        } else {
          for (int64_t j = 0; j < inner; ++j) d[j * dsi] = s[j * ssi];
        }
      }
      for (int k = nd - 2; k >= 0; --k) {
        doff += l.dst[k];
        soff += l.src[k];
        if (++idx[k] < l.shape[k]) break;
        doff -= l.dst[k] * l.shape[k];
        soff -= l.src[k] * l.shape[k];
        idx[k] = 0;
      }
    }
  });
}

}  // namespace

void shape_ops_strided_copy(void* dst, const int64_t* dst_strides, const void* src,
                            const int64_t* src_strides, const int64_t* shape, int ndim, DType dtype,
                            bool accumulate, int num_threads) {
  for (int k = 0; k < ndim; ++k)
    if (shape[k] == 0) return;
  const CopyLayout l = coalesce(dst_strides, src_strides, shape, ndim);
  if (accumulate) {
    WEFT_DTYPE_SWITCH(
        dtype, DT, "shape op accumulation (req=add)",
        run_strided<DT, true>(static_cast<DT*>(dst), static_cast<const DT*>(src), l, num_threads));
    return;
  }
  switch (dtype_size(dtype)) {
    case 1:
      run_strided<uint8_t, false>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), l,
                                  num_threads);
      break;
    case 2:
      run_strided<uint16_t, false>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src),
                                   l, num_threads);
      break;
    case 4:
      run_strided<uint32_t, false>(static_cast<uint32_t*>(dst), static_cast<const uint32_t*>(src),
                                   l, num_threads);
      break;
    case 8:
      run_strided<uint64_t, false>(static_cast<uint64_t*>(dst), static_cast<const uint64_t*>(src),
                                   l, num_threads);
      break;
    default:
      WEFT_THROW(NotImplemented) << "shape ops: dtype " << dtype_name(dtype)
                                 << " has an unsupported size";
  }
}

void shape_ops_zero(void* dst, size_t bytes, int num_threads) {
  char* p = static_cast<char*>(dst);
  parallel_for(static_cast<int64_t>(bytes), int64_t{1} << 18, num_threads,
               [&](int64_t b, int64_t e) { std::memset(p + b, 0, static_cast<size_t>(e - b)); });
}

}  // namespace weft::detail
