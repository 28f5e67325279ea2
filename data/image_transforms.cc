// run_host_op (an operator's CPU kernel run synchronously on host arrays) and the augmentation
// map functions of data/image.h built on it: crops, flips, resize, to_tensor, normalize, compose.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "data/image.h"
#include "ndarray/runtime.h"
#include "ops/op.h"
#include "ops/op_call.h"

namespace weft::data {

namespace {

// Runs `attrs`' CPU kernel on `inputs` now, on this thread (run_host_op's body).
std::vector<NDArray> run_host(const OpAttrs& attrs, const std::vector<NDArray>& inputs) {
  WEFT_CHECK(attrs.op != nullptr) << "run_host_op: no operator";
  const Op& op = *attrs.op;
  const int nin = op.num_inputs(attrs), nout = op.num_outputs(attrs);
  WEFT_CHECK(static_cast<int>(inputs.size()) == nin)
      << attrs.where() << ": expects " << nin << " inputs, got " << inputs.size();
  for (int i = 0; i < nin; ++i) {
    WEFT_CHECK(!inputs[i].is_none()) << attrs.where() << ": input " << i << " is a none array";
    WEFT_CHECK(inputs[i].device().type == DeviceType::kCPU)
        << attrs.where() << ": run_host_op runs on host arrays; input " << i << " is on "
        << to_string(inputs[i].device());
  }
  WEFT_CHECK_AS(NotImplemented, OpKernel::of(op, DeviceType::kCPU).compute != nullptr)
      << attrs.where() << " has no plain CPU kernel (run_host_op runs FCompute kernels only)";

  std::vector<Shape> shapes(nin + nout);  // inputs then outputs; the views point into it
  std::vector<Shape> in_shapes, out_shapes(nout);
  std::vector<DType> in_types, out_types(nout, DType::kUnknown);
  infer_outputs(attrs, inputs, in_shapes, in_types, out_shapes, out_types);

  // Kernel and resources (Note [One call path] in ops/op_call.cc).
  const OpCall call = OpCall::make(attrs, Device::cpu(), in_shapes, in_types, out_shapes);
  WEFT_CHECK_AS(NotImplemented, !call.resources.random)
      << attrs.where()
      << " draws from the engine's random state, which run_host_op cannot provide (draw "
         "from the map function's Rng and run the deterministic operator instead)";
  OpContext ctx;
  ctx.num_threads = 1;
  ctx.run.device = Device::cpu();
  DataPtr workspace;
  if (call.resources.workspace) {
    workspace = Runtime::get()
                    .allocator(Device::cpu())
                    .allocate(std::max<size_t>(call.resources.workspace_bytes, 1));
    ctx.workspace = workspace.get();
    ctx.workspace_bytes = call.resources.workspace_bytes;
  }
  if (const auto& f = op.attr<FMutateInputs>()) {
    for (int i : f(attrs)) {
      WEFT_CHECK(!inputs.at(i).storage()->read_only)
          << attrs.where() << ": input " << i << " is written by the op but is read-only";
    }
  }

  std::vector<NDArray> outputs(nout);
  std::vector<TensorView> in_views, out_views;
  for (int i = 0; i < nin; ++i) {
    shapes[i] = inputs[i].shape();
    TensorView v(inputs[i].storage()->data.get(), Device::cpu(), inputs[i].dtype(), shapes[i]);
    v.byte_offset = inputs[i].byte_offset();
    in_views.push_back(v);
  }
  for (int i = 0; i < nout; ++i) {
    outputs[i] = NDArray::empty(out_shapes[i], out_types[i], Device::cpu());
    shapes[nin + i] = out_shapes[i];
    TensorView v(outputs[i].storage()->data.get(), Device::cpu(), out_types[i], shapes[nin + i]);
    v.byte_offset = outputs[i].byte_offset();
    out_views.push_back(v);
  }
  const std::vector<OpReq> req(nout, OpReq::kWrite);
  call.run(ctx, in_views, req, out_views);
  outputs.resize(op.num_visible_outputs(attrs));
  return outputs;
}

// "(3, 4) uint8" for messages.
std::string describe(const NDArray& a) {
  std::ostringstream s;
  s << a.shape() << " " << dtype_name(a.dtype());
  return s.str();
}

// Rethrows the current exception with `prefix` before its message, keeping weft's error types.
[[noreturn]] void rethrow_with(const std::string& prefix) {
  try {
    throw;
  } catch (const ShapeError& e) {
    throw ShapeError(prefix + e.what());
  } catch (const NotImplemented& e) {
    throw NotImplemented(prefix + e.what());
  } catch (const OutOfMemory& e) {
    throw OutOfMemory(prefix + e.what());
  } catch (const InternalError& e) {
    throw InternalError(prefix + e.what());
  } catch (const ValueError& e) {
    throw ValueError(prefix + e.what());
  } catch (const std::exception& e) {
    throw Error(prefix + e.what());
  }
}

// A map function applying `body(image, rng) -> image` to array `component`, with errors naming
// the transform (`name`) and the array.
template <typename F>
MapFn image_map(std::string name, int component, F body) {
  WEFT_CHECK(component >= 0) << name << ": component " << component << " is negative";
  return [name = std::move(name), component, body = std::move(body)](std::vector<NDArray> arrays,
                                                                     Rng& rng) {
    WEFT_CHECK(component < static_cast<int>(arrays.size()))
        << name << ": the element has " << arrays.size() << " arrays, no component " << component;
    NDArray& a = arrays[static_cast<size_t>(component)];
    try {
      a = body(a, rng);
    } catch (...) {
      rethrow_with(name + ": array " + std::to_string(component) + " of shape " + describe(a) +
                   ": ");
    }
    return arrays;
  };
}

// Checks that `a` is an image (H, W, C) or a batch (N, H, W, C); returns {H, W}.
std::pair<int64_t, int64_t> image_hw(const NDArray& a) {
  WEFT_CHECK_AS(ShapeError, a.ndim() == 3 || a.ndim() == 4)
      << "expected an image (H, W, C) or a batch of images (N, H, W, C)";
  return {a.shape()[a.ndim() - 3], a.shape()[a.ndim() - 2]};
}

NDArray crop(const NDArray& a, int64_t x, int64_t y, int64_t width, int64_t height) {
  return run_host_op("_image_crop", {a},
                     {{"x", std::to_string(x)},
                      {"y", std::to_string(y)},
                      {"width", std::to_string(width)},
                      {"height", std::to_string(height)}})
      .at(0);
}

// Checks the window size of a crop transform; returns its name for messages.
std::string crop_name(const char* kind, int64_t height, int64_t width) {
  std::string name = std::string(kind) + "(height=" + std::to_string(height) +
                     ", width=" + std::to_string(width) + ")";
  WEFT_CHECK(height > 0 && width > 0) << name << ": the window must have a positive size";
  return name;
}

// Checks the window fits in the image; returns the image's {H, W}.
std::pair<int64_t, int64_t> window_room(const NDArray& a, int64_t height, int64_t width) {
  const auto [h, w] = image_hw(a);
  WEFT_CHECK_AS(ShapeError, h >= height && w >= width)
      << "the image is smaller than the " << height << " x " << width << " window";
  return {h, w};
}

// A float in a form that parses back to the same float.
std::string float_text(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(v));
  return buf;
}

std::string float_tuple(const std::vector<float>& values) {
  std::string s = "(";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + float_text(values[i]);
  return s + (values.size() == 1 ? ",)" : ")");
}

}  // namespace

std::vector<NDArray> run_host_op(std::string_view op, const std::vector<NDArray>& inputs,
                                 const AttrMap& attrs) {
  return run_host(get_op(op).make_attrs(attrs), inputs);
}

MapFn random_crop(int64_t height, int64_t width, int component) {
  return image_map(crop_name("random_crop", height, width), component,
                   [height, width](const NDArray& a, Rng& rng) {
                     const auto [h, w] = window_room(a, height, width);
                     // Row first, then column: the order of the draws is part of the contract.
                     const int64_t y = rng.uniform_int(0, h - height);
                     const int64_t x = rng.uniform_int(0, w - width);
                     if (h == height && w == width) return a;
                     return crop(a, x, y, width, height);
                   });
}

MapFn center_crop(int64_t height, int64_t width, int component) {
  return image_map(crop_name("center_crop", height, width), component,
                   [height, width](const NDArray& a, Rng&) {
                     const auto [h, w] = window_room(a, height, width);
                     if (h == height && w == width) return a;
                     return crop(a, (w - width) / 2, (h - height) / 2, width, height);
                   });
}

MapFn random_flip_left_right(double p, int component) {
  std::string name = "random_flip_left_right(p=" + float_text(static_cast<float>(p)) + ")";
  WEFT_CHECK(p >= 0.0 && p <= 1.0) << name << ": p must be in [0, 1]";
  return image_map(std::move(name), component, [p](const NDArray& a, Rng& rng) {
    image_hw(a);
    // One draw per element, whatever p is, so later draws do not depend on p.
    if (!rng.bernoulli(p)) return a;
    return run_host_op("_image_flip_left_right", {a}).at(0);
  });
}

MapFn resize(int64_t height, int64_t width, int component) {
  std::string name =
      "resize(height=" + std::to_string(height) + ", width=" + std::to_string(width) + ")";
  WEFT_CHECK(height > 0 && width > 0) << name << ": the size must be positive";
  auto attrs = std::make_shared<const OpAttrs>(
      get_op("_image_resize")
          .make_attrs(
              {{"size", "(" + std::to_string(width) + ", " + std::to_string(height) + ")"}}));
  return image_map(std::move(name), component, [attrs, height, width](const NDArray& a, Rng&) {
    const auto [h, w] = image_hw(a);
    if (h == height && w == width) return a;  // OpenCV copies equal sizes
    return run_host(*attrs, {a}).at(0);
  });
}

MapFn to_tensor(int component) {
  auto attrs = std::make_shared<const OpAttrs>(get_op("_image_to_tensor").make_attrs({}));
  return image_map("to_tensor", component,
                   [attrs](const NDArray& a, Rng&) { return run_host(*attrs, {a}).at(0); });
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): data/image.h's signature.
MapFn normalize(std::vector<float> mean, std::vector<float> std, int component) {
  std::string name = "normalize(mean=" + float_tuple(mean) + ", std=" + float_tuple(std) + ")";
  WEFT_CHECK(!mean.empty() && !std.empty()) << name << ": mean and std need at least one value";
  for (size_t i = 0; i < std.size(); ++i) {
    WEFT_CHECK(std[i] != 0.0f) << name << ": std[" << i << "] is 0";
  }
  auto attrs = std::make_shared<const OpAttrs>(
      get_op("_image_normalize")
          .make_attrs({{"mean", float_tuple(mean)}, {"std", float_tuple(std)}}));
  return image_map(std::move(name), component,
                   [attrs](const NDArray& a, Rng&) { return run_host(*attrs, {a}).at(0); });
}

MapFn compose(std::vector<MapFn> fns) {
  for (size_t i = 0; i < fns.size(); ++i) {
    WEFT_CHECK(static_cast<bool>(fns[i])) << "compose: function " << i << " is empty";
  }
  return [fns = std::move(fns)](std::vector<NDArray> arrays, Rng& rng) {
    for (const auto& fn : fns) arrays = fn(std::move(arrays), rng);
    return arrays;
  };
}

}  // namespace weft::data
