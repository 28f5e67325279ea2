// Entry point of the CPU kernels of the convolution / pooling / dense op group, and the kernel
// helpers those files share (workspace slicing, oneDNN reorders and scratchpads).
#include "ops/cpu/conv_kernels.h"
#include "ops/cpu/register.h"

namespace weft::detail {

void* WorkspaceCursor::take(size_t n) {
  if (n == 0) return nullptr;
  const size_t need = align64(n);
  WEFT_ICHECK(used_ + need <= bytes_)
      << "workspace too small: need " << used_ + need << " bytes, have " << bytes_;
  void* p = base_ + used_;
  used_ += need;
  return p;
}

#if WEFT_USE_ONEDNN
DnnlReformat make_reformat(const dnnl::memory::desc& plain, const dnnl::memory::desc& want) {
  DnnlReformat f;
  f.plain = plain;
  f.want = want;
  // A format that places every element as plain does (acdb of a 1x1 image) needs no copy.
  f.needed = !dnnl_util::same_placement(plain, want);
  if (f.needed) {
    auto& eng = dnnl_util::cpu_engine();
    f.to_want = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plain, eng, want));
    f.to_plain = dnnl::reorder(dnnl::reorder::primitive_desc(eng, want, eng, plain));
  }
  return f;
}

dnnl::memory dnnl_input(const DnnlReformat& f, void* data, WorkspaceCursor& ws) {
  auto& eng = dnnl_util::cpu_engine();
  if (!f.needed) return dnnl::memory(f.want, eng, data);
  dnnl::memory src(f.plain, eng, data);
  dnnl::memory dst(f.want, eng, ws.take(f.want.get_size()));
  f.to_want.execute(dnnl_util::thread_stream(), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
  return dst;
}

dnnl::memory dnnl_output(const DnnlReformat& f, void* data, WorkspaceCursor& ws) {
  auto& eng = dnnl_util::cpu_engine();
  if (!f.needed) return dnnl::memory(f.want, eng, data);
  return dnnl::memory(f.want, eng, ws.take(f.want.get_size()));
}

void dnnl_finish_output(const DnnlReformat& f, const dnnl::memory& produced, void* data) {
  if (!f.needed) return;
  dnnl::memory dst(f.plain, dnnl_util::cpu_engine(), data);
  f.to_plain.execute(dnnl_util::thread_stream(),
                     {{DNNL_ARG_FROM, const_cast<dnnl::memory&>(produced)}, {DNNL_ARG_TO, dst}});
}

void dnnl_add_scratchpad(const dnnl::memory::desc& desc, WorkspaceCursor& ws,
                         std::unordered_map<int, dnnl::memory>& args) {
  const size_t n = desc.get_size();
  if (n == 0) return;
  args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(desc, dnnl_util::cpu_engine(), ws.take(n)));
}

std::string dims_key(const dnnl::memory::dims& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(d[i]);
  }
  return s;
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}
#endif

}  // namespace weft::detail

namespace weft::cpu {

void register_conv_dense_kernels(OpRegistry& r) {
  detail::register_convolution_kernels(r);
  detail::register_fused_conv_kernels(r);
  detail::register_deconvolution_kernels(r);
  detail::register_pooling_kernels(r);
  detail::register_fully_connected_kernels(r);
  detail::register_dot_kernels(r);
}

}  // namespace weft::cpu
