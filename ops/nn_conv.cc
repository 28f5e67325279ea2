// Entry point of the convolution / pooling / dense op group, and the helpers those files share.
#include "ops/builtin_ops.h"
#include "ops/conv_common.h"

namespace weft::detail {

void register_nn_dnnl_ops(OpRegistry& r) {
  register_convolution_ops(r);
  register_fused_conv_ops(r);
  register_deconvolution_ops(r);
  register_pooling_ops(r);
  register_fully_connected_ops(r);
  register_dot_ops(r);
}

void check_channel_first_layout(const OpAttrs& attrs, const std::optional<SpatialLayout>& layout,
                                int nsp) {
  if (!layout) return;
  static const char* kNames[] = {"NCW", "NWC", "NCHW", "NHWC", "NCDHW", "NDHWC"};
  const SpatialLayout first = nsp == 1   ? SpatialLayout::kNCW
                              : nsp == 2 ? SpatialLayout::kNCHW
                                         : SpatialLayout::kNCDHW;
  const SpatialLayout last = nsp == 1   ? SpatialLayout::kNWC
                             : nsp == 2 ? SpatialLayout::kNHWC
                                        : SpatialLayout::kNDHWC;
  if (*layout == first) return;
  if (*layout == last) {
    WEFT_THROW(NotImplemented) << attrs.where() << ": layout " << kNames[static_cast<int>(*layout)]
                               << " is not supported on CPU (only "
                               << kNames[static_cast<int>(first)]
                               << "); transpose the data instead";
  }
  WEFT_THROW(ValueError) << attrs.where() << ": layout " << kNames[static_cast<int>(*layout)]
                         << " does not fit a " << nsp << "-d kernel (expected "
                         << kNames[static_cast<int>(first)] << ")";
}

void fill_spatial_tuple(Shape& t, int nsp, int64_t value, const char* name) {
  if (t.ndim() <= 0) {
    t = Shape::filled(nsp, value);
    return;
  }
  WEFT_CHECK(t.ndim() == nsp) << name << " " << t.to_string() << " must have " << nsp
                              << " entries, like the kernel";
}

bool ConvGeom::pointwise() const {
  for (int i = 0; i < 3; ++i) {
    if (k[i] != 1 || s[i] != 1 || p[i] != 0) return false;
  }
  return in == out;
}

void ConvGeom::set_window(const Shape& kernel, const Shape& stride, const Shape& dilate,
                          const Shape& pad) {
  nsp = kernel.ndim();
  for (int i = 0; i < nsp; ++i) {
    const int slot = 3 - nsp + i;
    k[slot] = kernel[i];
    s[slot] = stride[i];
    d[slot] = dilate[i];
    p[slot] = pad[i];
  }
}

void ConvGeom::set_spatial(const Shape& in_shape, const Shape& out_shape) {
  for (int i = 0; i < nsp; ++i) {
    in[3 - nsp + i] = in_shape[in_shape.ndim() - nsp + i];
    out[3 - nsp + i] = out_shape[out_shape.ndim() - nsp + i];
  }
}

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
