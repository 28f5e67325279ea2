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
}

}  // namespace weft::py
