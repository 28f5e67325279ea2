// weft.dist's native part: the process group (init, rank, size, shutdown) and the collectives of
// dist/dist.h on NDArrays, with dist::DistError raised as weft.dist.DistError.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dist/dist.h"
#include "py_common.h"

namespace weft::py {
namespace {

PyObject* dist_error = nullptr;  // weft.dist.DistError(weft.WeftError)

using NamedArrays = std::vector<std::pair<std::string, NDArray>>;

dist::CollectiveOptions collective_options(std::string name, int priority) {
  dist::CollectiveOptions options;
  options.name = std::move(name);
  options.priority = priority;
  return options;
}

/// The first dimension of `in`, checked to exist: allgather and reduce_scatter split or join
/// arrays along axis 0.
int64_t leading_dim(const NDArray& in, const char* what, const std::string& name) {
  if (in.ndim() < 1) {
    throw ValueError(std::string(what) + ": '" + (name.empty() ? "<unnamed>" : name) +
                     "' is 0-d; it needs an axis 0 to " +
                     (std::string(what) == "allgather" ? "join along" : "split"));
  }
  return in.shape()[0];
}

/// `in`'s shape with the first dimension replaced by `first`.
Shape with_leading(const NDArray& in, int64_t first) {
  std::vector<int64_t> dims;
  for (int i = 0; i < in.ndim(); ++i) dims.push_back(in.shape()[i]);
  dims[0] = first;
  return Shape(dims);
}

nb::dict stats_dict() {
  dist::Stats s = dist::stats();
  nb::dict d;
  d["collectives"] = s.collectives;
  d["fused_batches"] = s.fused_batches;
  d["transport_calls"] = s.transport_calls;
  d["bytes_reduced"] = s.bytes_reduced;
  d["cycles"] = s.cycles;
  return d;
}

}  // namespace

void init_dist(nb::module_& m) {
  nb::module_ d = m.def_submodule("dist", "Collectives across processes (weft.dist).");
  dist_error = PyErr_NewExceptionWithDoc(
      "weft.dist.DistError",
      "A collective failed across processes: a rank stopped answering or did not issue it within "
      "the timeout, ranks disagree on a tensor's shape, type or operation, or the transport "
      "failed. The message names the collective, its tensor and the ranks involved.",
      nb::getattr(m, "WeftError").ptr(), nullptr);
  d.attr("DistError") = nb::handle(dist_error);
  // Tried before the module's general translator (nanobind tries the latest registered first),
  // so DistError is not reported as its base class.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const dist::DistError& e) {
      PyErr_SetString(dist_error, e.what());
    }
  });

  d.def(
      "init",
      [](std::optional<double> timeout, std::optional<size_t> fusion_bytes,
         std::optional<double> cycle_ms) {
        dist::Options options = dist::Options::from_environment();
        if (timeout) options.timeout_s = *timeout;
        if (fusion_bytes) options.fusion_bytes = *fusion_bytes;
        if (cycle_ms) options.cycle_ms = *cycle_ms;
        nb::gil_scoped_release release;
        dist::init(options);
      },
      nb::arg("timeout") = nb::none(), nb::arg("fusion_bytes") = nb::none(),
      nb::arg("cycle_ms") = nb::none(),
      "Joins the process group (arguments left None come from WEFT_DIST_*).");
  d.def("initialized", &dist::initialized, "Whether init() was called and shutdown() was not.");
  d.def(
      "shutdown",
      []() {
        nb::gil_scoped_release release;
        dist::shutdown();
      },
      "Waits for this process's collectives and leaves the group.");
  d.def("rank", &dist::rank, "This process's rank.");
  d.def("size", &dist::size, "The number of processes in the group.");
  d.def("local_rank", &dist::local_rank, "This process's rank among those on its host.");
  d.def("local_size", &dist::local_size, "The number of processes on this host.");
  d.def("backend", &dist::backend, "The transport, e.g. 'mpi (Open MPI 4.1.4)'.");

  d.def(
      "allreduce",
      [](const NDArray& in, std::optional<NDArray> out, const std::string& op,
         const std::string& name, int priority) {
        NDArray dst = out ? *out : in;
        dist::ReduceOp reduce = dist::parse_reduce_op(op);
        dist::allreduce(in, dst, reduce, collective_options(name, priority));
        return dst;
      },
      nb::arg("input"), nb::arg("out") = nb::none(), nb::arg("op") = "sum", nb::arg("name") = "",
      nb::arg("priority") = 0, "out = op over ranks of input (in place without out); returns out.");
  d.def(
      "broadcast",
      [](const NDArray& array, int root, const std::string& name, int priority) {
        dist::broadcast(array, root, collective_options(name, priority));
        return array;
      },
      nb::arg("array"), nb::arg("root") = 0, nb::arg("name") = "", nb::arg("priority") = 0,
      "array on every rank becomes root's; returns array.");
  d.def(
      "allgather",
      [](const NDArray& in, std::optional<NDArray> out, const std::string& name, int priority) {
        int64_t n = leading_dim(in, "allgather", name);
        NDArray dst =
            out ? *out
                : NDArray::empty(with_leading(in, n * dist::size()), in.dtype(), in.device());
        dist::allgather(in, dst, collective_options(name, priority));
        return dst;
      },
      nb::arg("input"), nb::arg("out") = nb::none(), nb::arg("name") = "", nb::arg("priority") = 0,
      "The ranks' inputs concatenated along axis 0 in rank order; returns out.");
  d.def(
      "reduce_scatter",
      [](const NDArray& in, std::optional<NDArray> out, const std::string& op,
         const std::string& name, int priority) {
        dist::ReduceOp reduce = dist::parse_reduce_op(op);
        NDArray dst;
        if (out) {
          dst = *out;
        } else {
          int64_t n = leading_dim(in, "reduce_scatter", name);
          int world = dist::size();
          if (n % world != 0) {
            throw ValueError("reduce_scatter: '" + (name.empty() ? "<unnamed>" : name) + "' has " +
                             std::to_string(n) +
                             " rows along axis 0, not a multiple of the group size " +
                             std::to_string(world));
          }
          dst = NDArray::empty(with_leading(in, n / world), in.dtype(), in.device());
        }
        dist::reduce_scatter(in, dst, reduce, collective_options(name, priority));
        return dst;
      },
      nb::arg("input"), nb::arg("out") = nb::none(), nb::arg("op") = "sum", nb::arg("name") = "",
      nb::arg("priority") = 0, "This rank's slice along axis 0 of op over ranks; returns out.");
  d.def(
      "barrier",
      [](const std::string& name) {
        nb::gil_scoped_release release;
        dist::barrier(collective_options(name, 0));
      },
      nb::arg("name") = "", "Blocks until every rank reaches its matching barrier.");
  d.def(
      "allreduce_gradients",
      [](const NamedArrays& grads) {
        nb::gil_scoped_release release;
        dist::allreduce_gradients(grads);
      },
      nb::arg("grads"), "Averages (name, gradient) pairs over ranks in place, in the order given.");
  d.def(
      "broadcast_parameters",
      [](const NamedArrays& params, int root) {
        nb::gil_scoped_release release;
        dist::broadcast_parameters(params, root);
      },
      nb::arg("params"), nb::arg("root") = 0,
      "Makes every rank's (name, array) pairs equal to root's, in place.");
  d.def("stats", &stats_dict, "Counters of this process's coordination, as a dict.");
}

}  // namespace weft::py
