// oneDNN memory descriptors as tensor layouts (DnnlLayout), their names and keys, and the cached
// reorder between two layouts of one tensor.
#include "ops/cpu/dnnl_util.h"

#if WEFT_USE_ONEDNN
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

namespace weft::dnnl_util {
namespace {

using dnnl::memory;

const dnnl_blocking_desc_t& blocking(const memory::desc& d) { return d.data.format_desc.blocking; }
bool is_blocked(const memory::desc& d) { return d.data.format_kind == dnnl_blocked; }

void append_list(std::string& s, const dnnl_dim_t* v, int n) {
  for (int i = 0; i < n; ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
}

}  // namespace

std::string format_name(const memory::desc& d) {
  if (!is_blocked(d)) return "opaque";
  const int n = d.data.ndims;
  const auto& b = blocking(d);
  std::vector<bool> blocked(n, false);
  for (int k = 0; k < b.inner_nblks; ++k) blocked[b.inner_idxs[k]] = true;
  // Outer dims from the largest stride to the smallest (ties keep the logical order), as oneDNN
  // spells its format tags: upper case for a dim that also has an inner block.
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int x, int y) { return b.strides[x] > b.strides[y]; });
  std::string name;
  for (int i : order) name += static_cast<char>((blocked[i] ? 'A' : 'a') + i);
  for (int k = 0; k < b.inner_nblks; ++k)
    name += std::to_string(b.inner_blks[k]) + static_cast<char>('a' + b.inner_idxs[k]);
  return name;
}

std::string desc_key(const memory::desc& d) {
  const dnnl_memory_desc_t& m = d.data;
  std::string key = std::to_string(static_cast<int>(m.data_type)) + ":";
  append_list(key, m.dims, m.ndims);
  key += "/";
  append_list(key, m.padded_dims, m.ndims);
  key += "/";
  append_list(key, m.padded_offsets, m.ndims);
  key += "@" + std::to_string(m.offset0) + ":";
  if (is_blocked(d)) {
    const auto& b = blocking(d);
    append_list(key, b.strides, m.ndims);
    key += ":" + format_name(d);
  } else {
    // Not a blocked format (none that weft's kernels ask for): the raw descriptor is the key.
    key += "raw:";
    const auto* bytes = reinterpret_cast<const unsigned char*>(&m);
    for (size_t i = 0; i < sizeof m; ++i) key += std::to_string(bytes[i]) + ".";
  }
  return key;
}

DnnlLayout::DnnlLayout(const memory::desc& desc) : desc_(desc), key_(desc_key(desc)) {}

std::string DnnlLayout::name() const { return format_name(desc_); }

bool same_placement(const memory::desc& a, const memory::desc& b) {
  if (a == b) return true;
  if (!is_blocked(a) || !is_blocked(b)) return false;
  const dnnl_memory_desc_t &x = a.data, &y = b.data;
  if (x.ndims != y.ndims || x.data_type != y.data_type || x.offset0 != y.offset0) return false;
  const auto &bx = blocking(a), &by = blocking(b);
  if (bx.inner_nblks != by.inner_nblks) return false;
  for (int k = 0; k < bx.inner_nblks; ++k) {
    if (bx.inner_blks[k] != by.inner_blks[k] || bx.inner_idxs[k] != by.inner_idxs[k]) return false;
  }
  for (int i = 0; i < x.ndims; ++i) {
    if (x.dims[i] != y.dims[i] || x.padded_dims[i] != y.padded_dims[i] ||
        x.padded_offsets[i] != y.padded_offsets[i])
      return false;
    // A stride only matters along a dim that has more than one (padded) position.
    if (x.padded_dims[i] > 1 && bx.strides[i] != by.strides[i]) return false;
  }
  return true;
}

LayoutRef make_layout(const memory::desc& desc) {
  if (is_blocked(desc)) {
    const memory::dims dims(desc.data.dims, desc.data.dims + desc.data.ndims);
    const auto type = static_cast<memory::data_type>(desc.data.data_type);
    memory::dims strides(dims.size());
    int64_t stride = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= dims[i];
    }
    if (same_placement(desc, memory::desc(dims, type, strides))) return nullptr;
  }
  return std::make_shared<const DnnlLayout>(desc);
}

const memory::desc* desc_of(const MemoryLayout* layout) {
  if (layout == nullptr) return nullptr;
  const auto* d = dynamic_cast<const DnnlLayout*>(layout);
  WEFT_ICHECK(d != nullptr) << "layout " << layout->name() << " is not a oneDNN layout";
  return &d->desc();
}

memory::desc input_desc(const OpContext& ctx, size_t i, const TensorView& v) {
  const memory::desc* d = desc_of(ctx.input_layout(i));
  return d ? *d : plain_desc(v);
}

memory::desc output_desc(const OpContext& ctx, size_t i, const TensorView& v) {
  const memory::desc* d = desc_of(ctx.output_layout(i));
  return d ? *d : plain_desc(v);
}

void reorder_data(const memory::desc& src_desc, const void* src, const memory::desc& dst_desc,
                  void* dst, int threads) {
  const std::string key = "reorder|" + desc_key(src_desc) + "|" + desc_key(dst_desc);
  auto& prim = cached<dnnl::reorder>(key, [&] {
    return dnnl::reorder(
        dnnl::reorder::primitive_desc(cpu_engine(), src_desc, cpu_engine(), dst_desc));
  });
  ScopedThreads scoped(threads);
  execute(prim, {{DNNL_ARG_FROM, wrap(src_desc, const_cast<void*>(src))},
                 {DNNL_ARG_TO, wrap(dst_desc, dst)}});
}

}  // namespace weft::dnnl_util
#endif
