// weft.nn's native part (weft._weft.nn): the C++ initializers of nn/, which weft.nn.init's
// classes wrap so that the same seed gives the same parameters in C++ and Python (Note [One
// initialiser] in nn/init.h), and the C++ layers with nn::init, so that the two can be compared.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/nn.h"
#include "py_common.h"

namespace weft::py {
namespace {

using nn::InitializerPtr;
// Initializers are immutable; Python holds them as shared pointers to non-const objects only
// because nanobind's holders are, and hands them to C++ as InitializerPtr.
using PyInit = std::shared_ptr<nn::Initializer>;

// A fresh float32 NumPy array of `shape` holding `values`.
nb::object to_numpy(const std::vector<float>& values, const Shape& shape) {
  auto* buffer = new float[values.empty() ? 1 : values.size()];
  nb::capsule owner(buffer, [](void* p) noexcept { delete[] static_cast<float*>(p); });
  if (!values.empty()) std::memcpy(buffer, values.data(), values.size() * sizeof(float));
  std::vector<size_t> dims(static_cast<size_t>(shape.ndim()));
  for (int i = 0; i < shape.ndim(); ++i) dims[i] = static_cast<size_t>(shape[i]);
  return nb::ndarray<nb::numpy, float>(buffer, dims.size(), dims.data(), owner).cast();
}

// A pair of sizes from an int or a 2-sequence.
nn::Size2 to_size2(nb::handle obj, const char* what) {
  if (nb::isinstance<nb::int_>(obj)) return nn::Size2(nb::cast<int64_t>(obj));
  const Shape s = to_shape(obj, what);
  if (s.ndim() != 2) throw ValueError(std::string(what) + ": expected an int or two ints");
  return nn::Size2(s[0], s[1]);
}

void init_initializers(nb::module_& m) {
  nb::class_<nn::Initializer>(m, "Initializer",
                              "A C++ parameter initializer of nn/ (immutable, thread-safe).")
      .def(
          "values",
          [](const nn::Initializer& init, nb::handle shape, uint64_t seed,
             const std::string& name) {
            const Shape s = to_shape(shape, "Initializer.values shape");
            std::vector<float> v;
            {
              nb::gil_scoped_release release;
              v = nn::initial_values(init, s, seed, name);
            }
            return to_numpy(v, s);
          },
          nb::arg("shape"), nb::arg("seed"), nb::arg("name"),
          "The float32 values of parameter `name` of `shape` under `seed`: the values nn::init "
          "gives it in C++.")
      .def("describe", &nn::Initializer::describe);
  nb::class_<nn::Constant, nn::Initializer>(m, "Constant")
      .def(nb::init<double>(), nb::arg("value"));
  nb::class_<nn::Uniform, nn::Initializer>(m, "Uniform")
      .def(nb::init<double>(), nb::arg("scale") = 0.07);
  nb::class_<nn::Normal, nn::Initializer>(m, "Normal")
      .def(nb::init<double>(), nb::arg("sigma") = 0.01);
  nb::class_<nn::Xavier, nn::Initializer>(m, "Xavier")
      .def(nb::init<std::string, std::string, double>(), nb::arg("rnd_type") = "uniform",
           nb::arg("factor_type") = "avg", nb::arg("magnitude") = 3.0);
  nb::class_<nn::MSRAPrelu, nn::Xavier>(m, "MSRAPrelu")
      .def(nb::init<std::string, double>(), nb::arg("factor_type") = "avg",
           nb::arg("slope") = 0.25);
  m.def(
      "default_initializer",
      [](const std::string& name) {
        return std::const_pointer_cast<nn::Initializer>(nn::default_initializer(name));
      },
      nb::arg("name"),
      "The initializer of a parameter without one, by name (MXNet's rule: biases, betas and "
      "moving means Zero; gammas and moving variances One; others Xavier).");
}

void init_layers(nb::module_& m) {
  nb::class_<nn::Layer>(m, "Layer", "A C++ layer of nn/ (holds no parameters).")
      .def_prop_ro("name", &nn::Layer::name)
      .def_prop_ro("kind", &nn::Layer::kind);
  nb::class_<nn::Dense, nn::Layer>(m, "Dense")
      .def(
          "__init__",
          [](nn::Dense* self, int64_t units, std::string activation, bool use_bias, bool flatten,
             PyInit weight_init, PyInit bias_init, std::string name) {
            new (self) nn::Dense(units,
                                 {.activation = std::move(activation),
                                  .use_bias = use_bias,
                                  .flatten = flatten,
                                  .weight_init = std::move(weight_init),
                                  .bias_init = std::move(bias_init)},
                                 std::move(name));
          },
          nb::arg("units"), nb::arg("activation") = "", nb::arg("use_bias") = true,
          nb::arg("flatten") = true, nb::arg("weight_init").none() = nb::none(),
          nb::arg("bias_init").none() = nb::none(), nb::arg("name") = "");
  nb::class_<nn::Conv2D, nn::Layer>(m, "Conv2D")
      .def(
          "__init__",
          [](nn::Conv2D* self, int64_t channels, nb::handle kernel, nb::handle strides,
             nb::handle padding, nb::handle dilation, int64_t groups, std::string activation,
             bool use_bias, PyInit weight_init, PyInit bias_init, std::string name) {
            new (self) nn::Conv2D(channels, to_size2(kernel, "Conv2D kernel_size"),
                                  {.strides = to_size2(strides, "Conv2D strides"),
                                   .padding = to_size2(padding, "Conv2D padding"),
                                   .dilation = to_size2(dilation, "Conv2D dilation"),
                                   .groups = groups,
                                   .activation = std::move(activation),
                                   .use_bias = use_bias,
                                   .weight_init = std::move(weight_init),
                                   .bias_init = std::move(bias_init)},
                                  std::move(name));
          },
          nb::arg("channels"), nb::arg("kernel_size"), nb::arg("strides") = 1,
          nb::arg("padding") = 0, nb::arg("dilation") = 1, nb::arg("groups") = 1,
          nb::arg("activation") = "", nb::arg("use_bias") = true,
          nb::arg("weight_init").none() = nb::none(), nb::arg("bias_init").none() = nb::none(),
          nb::arg("name") = "");
  nb::class_<nn::BatchNorm, nn::Layer>(m, "BatchNorm")
      .def(
          "__init__",
          [](nn::BatchNorm* self, int axis, double momentum, double epsilon, bool scale,
             bool use_global_stats, std::string name) {
            new (self) nn::BatchNorm({.axis = axis,
                                      .momentum = momentum,
                                      .epsilon = epsilon,
                                      .scale = scale,
                                      .use_global_stats = use_global_stats},
                                     std::move(name));
          },
          nb::arg("axis") = 1, nb::arg("momentum") = 0.9, nb::arg("epsilon") = 1e-5,
          nb::arg("scale") = true, nb::arg("use_global_stats") = false, nb::arg("name") = "");
  nb::class_<nn::Activation, nn::Layer>(m, "Activation")
      .def(nb::init<std::string, std::string>(), nb::arg("act_type"), nb::arg("name") = "");
  nb::class_<nn::Flatten, nn::Layer>(m, "Flatten")
      .def(nb::init<std::string>(), nb::arg("name") = "");
  nb::class_<nn::Sequential, nn::Layer>(m, "Sequential")
      .def(nb::init<std::vector<nn::LayerPtr>, std::string>(), nb::arg("layers"),
           nb::arg("name") = "");

  m.def(
      "init",
      [](const nn::LayerPtr& layer, const std::vector<nb::object>& shapes, uint64_t seed) {
        if (!layer) throw ValueError("nn.init: the layer is None");
        std::vector<Shape> in;
        for (const nb::object& s : shapes) {
          // None marks a deferred dimension, as in weft.nn (0 in C++).
          std::vector<int64_t> dims;
          for (nb::handle d : s) dims.push_back(d.is_none() ? 0 : nb::cast<int64_t>(d));
          in.emplace_back(dims);
        }
        nn::Parameters params;
        {
          nb::gil_scoped_release release;
          params = nn::init(*layer, in, seed);
        }
        std::vector<std::pair<std::string, NDArray>> out;
        for (const std::string& name : params.names()) out.emplace_back(name, params.at(name));
        return out;
      },
      nb::arg("layer"), nb::arg("shapes"), nb::arg("seed") = 0,
      "nn::init of the C++ layer: (name, array) pairs in nn::init's order.");
}

}  // namespace

void init_nn(nb::module_& m) {
  nb::module_ nn_module = m.def_submodule("nn", "The C++ core of weft.nn (nn/).");
  init_initializers(nn_module);
  init_layers(nn_module);
}

}  // namespace weft::py
