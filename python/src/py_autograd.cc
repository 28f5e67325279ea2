// weft.autograd's native part: the per-thread recording and training flags, backward and grad.
// The context managers (record, pause, train_mode, predict_mode) are in weft/autograd.py.
#include <nanobind/stl/optional.h>

#include "ndarray/autograd.h"
#include "py_common.h"

namespace weft::py {
namespace {

std::vector<NDArray> heads_of(nb::handle heads) {
  if (nb::isinstance<NDArray>(heads)) return {nb::cast<NDArray>(heads)};
  return nb::cast<std::vector<NDArray>>(heads);
}

std::vector<NDArray> head_grads_of(nb::handle grads, size_t n) {
  if (grads.is_none()) return {};
  std::vector<NDArray> out;
  if (nb::isinstance<NDArray>(grads)) {
    out.push_back(nb::cast<NDArray>(grads));
  } else {
    for (nb::handle g : nb::iter(grads)) {
      out.push_back(g.is_none() ? NDArray() : nb::cast<NDArray>(g));
    }
  }
  if (out.size() != n) {
    throw ValueError("autograd: " + std::to_string(out.size()) + " head gradients for " +
                     std::to_string(n) + " heads");
  }
  return out;
}

// A Python object held from C++ state that may be released on any thread (a tape node dies when
// the last array referring to it does): the reference is dropped under the GIL, or leaked while
// the interpreter is finalizing.
std::shared_ptr<PyObject> hold(nb::handle obj) {
  return std::shared_ptr<PyObject>(obj.inc_ref().ptr(), [](PyObject* p) {
    if (interpreter_finalizing()) return;
    nb::gil_scoped_acquire gil;
    Py_DECREF(p);
  });
}

bool record_function(const std::string& name, nb::handle inputs, nb::list outputs,
                     nb::handle backward) {
  if (!PyCallable_Check(backward.ptr())) {
    throw ValueError("record_function '" + name + "': backward is not callable");
  }
  std::vector<NDArray> in = heads_of(inputs);
  std::vector<NDArray*> out_objs;
  std::vector<NDArray> out;
  for (nb::handle o : outputs) {
    if (!nb::isinstance<NDArray>(o)) {
      throw ValueError("record_function '" + name + "': outputs must be NDArrays");
    }
    out_objs.push_back(&nb::cast<NDArray&>(o));
    out.push_back(*out_objs.back());
  }
  auto fn = hold(backward);
  const size_t n_in = in.size();
  autograd::BackwardFunction bw = [fn, name, n_in](const std::vector<NDArray>& grads) {
    nb::gil_scoped_acquire gil;
    nb::list g;
    for (const auto& a : grads) g.append(nb::cast(a));
    nb::object r = nb::borrow(fn.get())(g);
    std::vector<NDArray> result;
    for (nb::handle x : nb::iter(r)) {
      result.push_back(x.is_none() ? NDArray() : nb::cast<NDArray>(x));
    }
    if (result.size() != n_in) {
      throw ValueError("backward of '" + name + "' returned " + std::to_string(result.size()) +
                       " gradients for " + std::to_string(n_in) + " inputs");
    }
    return result;
  };
  if (!autograd::record_function(name, in, out, std::move(bw))) return false;
  // The Python objects are the arrays the caller holds: give them their autograd entries.
  for (size_t k = 0; k < out.size(); ++k) out_objs[k]->set_autograd_entry(out[k].autograd_entry());
  return true;
}

}  // namespace

void init_autograd(nb::module_& m) {
  nb::module_ ag = m.def_submodule("autograd", "Native autograd functions.");
  ag.def("is_recording", &autograd::is_recording,
         "Whether operations on this thread are being recorded.");
  ag.def("is_training", &autograd::is_training,
         "Whether operations on this thread run in training mode.");
  ag.def("set_recording", &autograd::set_recording, nb::arg("recording"),
         "Sets the recording flag of this thread; returns the previous value.");
  ag.def("set_training", &autograd::set_training, nb::arg("training"),
         "Sets the training flag of this thread; returns the previous value.");
  ag.def(
      "backward",
      [](nb::handle heads, nb::handle head_grads, bool retain_graph, bool train_mode) {
        std::vector<NDArray> h = heads_of(heads);
        autograd::backward(h, head_grads_of(head_grads, h.size()), retain_graph, train_mode);
      },
      nb::arg("heads"), nb::arg("head_grads") = nb::none(), nb::arg("retain_graph") = false,
      nb::arg("train_mode") = true,
      "Computes the gradients of `heads` into the .grad of every leaf they depend on (pushed; "
      "returns at once).");
  ag.def(
      "grad",
      [](nb::handle heads, nb::handle variables, nb::handle head_grads, bool retain_graph,
         bool train_mode) {
        std::vector<NDArray> h = heads_of(heads);
        return autograd::grad(h, heads_of(variables), head_grads_of(head_grads, h.size()),
                              retain_graph, train_mode);
      },
      nb::arg("heads"), nb::arg("variables"), nb::arg("head_grads") = nb::none(),
      nb::arg("retain_graph") = false, nb::arg("train_mode") = true,
      "The gradients of `heads` with respect to `variables`, returned as new arrays.");
  ag.def("record_function", &record_function, nb::arg("name"), nb::arg("inputs"),
         nb::arg("outputs"), nb::arg("backward"),
         "Records a computation done outside the operator set as one tape node: `outputs` (a "
         "list of NDArrays) get autograd entries; `backward(out_grads)` returns one gradient (or "
         "None) per input. Records only while recording with an input that requires a gradient; "
         "returns whether it did.");
}

}  // namespace weft::py
