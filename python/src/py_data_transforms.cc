// weft.data's map functions as objects (weft.data.Transform): the image transforms of
// data/image.h, Python functions, compositions of both; the image codecs; RecordIOWriter.
#include <nanobind/stl/optional.h>

#include <cstdint>
#include <cstdio>
#include <optional>

#include "data/image.h"
#include "data/sources.h"
#include "py_data.h"

namespace weft::py {

Transform python_transform(nb::object fn, std::string name, bool pass_rng) {
  Transform t;
  t.name = name;
  t.uses_python = true;
  t.fn = [fn = share_ref(fn), pass_rng, name](std::vector<NDArray> arrays, data::Rng& rng) {
    // Drawn from the element's own generator: the same numbers whichever thread runs it.
    uint64_t seed = 0;
    if (pass_rng) {
      const uint64_t hi = rng.next_u32();  // two statements: the order of draws is fixed
      seed = (hi << 32) | rng.next_u32();
    }
    return with_gil("map", [&] {
      nb::tuple args = arrays_to_args(arrays);
      arrays.clear();
      PyObject* result = nullptr;
      if (pass_rng) {
        nb::dict kwargs;
        kwargs["rng"] = nb::module_::import_("numpy.random").attr("default_rng")(seed);
        result = PyObject_Call(fn->get().ptr(), args.ptr(), kwargs.ptr());
      } else {
        result = PyObject_CallObject(fn->get().ptr(), args.ptr());
      }
      if (result == nullptr) throw nb::python_error();
      return python_to_arrays(nb::steal(result), name.c_str());
    });
  };
  return t;
}

namespace {

// transform(*arrays, seed=0): runs it now, on this thread, on copies of the arrays (a transform may
// write its inputs), with a generator seeded `seed`.
nb::object call_transform(const Transform& t, nb::args args, uint64_t seed) {
  std::vector<NDArray> inputs;
  for (nb::handle a : args) {
    NDArray x = python_to_array(a, t.name.c_str());
    if (nb::isinstance<NDArray>(a)) {
      nb::gil_scoped_release release;
      x = x.copy();
      x.wait_to_read();
    }
    inputs.push_back(std::move(x));
  }
  std::vector<NDArray> outputs;
  {
    nb::gil_scoped_release release;
    data::Rng rng(seed, 0);
    outputs = t.fn(std::move(inputs), rng);
  }
  return arrays_to_python(outputs);
}

std::string size_name(const char* what, int64_t height, int64_t width) {
  return std::string(what) + "(" + std::to_string(height) + ", " + std::to_string(width) + ")";
}

std::string format_number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

nb::bytes to_bytes(const std::vector<uint8_t>& v) {
  return nb::bytes(reinterpret_cast<const char*>(v.data()), v.size());
}

void init_transform_class(nb::module_& m) {
  nb::class_<Transform>(m, "_Transform", "A map function of weft.data (weft.data.Transform).")
      .def_ro("name", &Transform::name)
      .def_ro("uses_python", &Transform::uses_python)
      .def("__call__", &call_transform, nb::arg("arrays"), nb::arg("seed") = 0)
      .def("__repr__", [](const Transform& t) { return "<weft.data.Transform " + t.name + ">"; });
  m.def("_data_python_transform", &python_transform, nb::arg("fn"), nb::arg("name"),
        nb::arg("rng"));
  m.def(
      "_data_compose",
      [](const std::vector<Transform>& parts) {
        Transform t;
        std::vector<data::MapFn> fns;
        t.name = "compose(";
        for (size_t i = 0; i < parts.size(); ++i) {
          fns.push_back(parts[i].fn);
          t.name += (i > 0 ? ", " : "") + parts[i].name;
          t.uses_python = t.uses_python || parts[i].uses_python;
        }
        t.name += ")";
        t.fn = data::compose(std::move(fns));
        return t;
      },
      nb::arg("transforms"));
}

void init_image_transforms(nb::module_& m) {
  m.def("_data_decode_image", [](int channels, int component) {
    return Transform{data::decode_image(channels, component),
                     "decode_image(channels=" + std::to_string(channels) + ")"};
  });
  m.def("_data_random_crop", [](int64_t height, int64_t width, int component) {
    return Transform{data::random_crop(height, width, component),
                     size_name("random_crop", height, width)};
  });
  m.def("_data_center_crop", [](int64_t height, int64_t width, int component) {
    return Transform{data::center_crop(height, width, component),
                     size_name("center_crop", height, width)};
  });
  m.def("_data_random_flip_left_right", [](double p, int component) {
    return Transform{data::random_flip_left_right(p, component),
                     "random_flip_left_right(p=" + format_number(p) + ")"};
  });
  m.def("_data_resize", [](int64_t height, int64_t width, int component) {
    return Transform{data::resize(height, width, component), size_name("resize", height, width)};
  });
  m.def("_data_to_tensor", [](int component) {
    return Transform{data::to_tensor(component), "to_tensor"};
  });
  m.def("_data_normalize", [](std::vector<float> mean, std::vector<float> std, int component) {
    return Transform{data::normalize(std::move(mean), std::move(std), component), "normalize"};
  });
}

void init_codecs(nb::module_& m) {
  m.def(
      "_data_decode_image_bytes",
      [](nb::bytes encoded, int channels) {
        // The bytes object stays alive (held by the caller's frame) while the GIL is released.
        nb::gil_scoped_release release;
        return data::decode_image_bytes(encoded.c_str(), encoded.size(), channels, "image");
      },
      nb::arg("data"), nb::arg("channels"));
  m.def(
      "_data_encode_jpeg",
      [](nb::handle image, int quality) {
        NDArray x = python_to_array(image, "encode_jpeg");
        std::vector<uint8_t> out;
        {
          nb::gil_scoped_release release;
          out = data::encode_jpeg(x, quality);
        }
        return to_bytes(out);
      },
      nb::arg("image"), nb::arg("quality"));
  m.def(
      "_data_encode_png",
      [](nb::handle image) {
        NDArray x = python_to_array(image, "encode_png");
        std::vector<uint8_t> out;
        {
          nb::gil_scoped_release release;
          out = data::encode_png(x);
        }
        return to_bytes(out);
      },
      nb::arg("image"));
}

void init_recordio_writer(nb::module_& m) {
  nb::class_<data::RecordIOWriter>(m, "_RecordIOWriter", "Writes MXNet RecordIO files.")
      .def(nb::init<const std::string&, const std::string&>(), nb::arg("rec_path"),
           nb::arg("idx_path"))
      .def(
          "write",
          [](data::RecordIOWriter& w, nb::bytes record, uint64_t key) {
            w.write(record.c_str(), record.size(), key);
          },
          nb::arg("record"), nb::arg("key"))
      .def(
          "write_image",
          [](data::RecordIOWriter& w, const std::vector<float>& labels, nb::bytes image,
             uint64_t key) { w.write_image(labels, image.c_str(), image.size(), key); },
          nb::arg("labels"), nb::arg("image"), nb::arg("key"))
      .def("close", &data::RecordIOWriter::close);
}

}  // namespace

void init_data_transforms(nb::module_& m) {
  init_transform_class(m);
  init_image_transforms(m);
  init_codecs(m);
  init_recordio_writer(m);
}

}  // namespace weft::py
