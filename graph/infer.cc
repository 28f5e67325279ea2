// Shape and type inference: forward and backward sweeps of the ops' rules to a fixed point.
#include "graph/infer.h"

#include <sstream>

#include "base/error.h"
#include "devices/device_api.h"

namespace weft::graph {
namespace {

std::string node_label(const Graph& g, uint32_t nid) {
  const Node& n = g.nodes[nid];
  std::string s = "node " + std::to_string(nid) + " ('" + n.name + "'";
  if (n.op) s += ", op " + n.op->name();
  return s + ")";
}

// The shape a variable starts with: the caller's, else `__shape__` (0 = unknown dimension, as
// gluon writes deferred dims). The batch size replaces (given) or fills (unknown) dimension 0.
Shape initial_shape(const Graph& g, uint32_t nid, const InferInputs& in) {
  const Node& n = g.nodes[nid];
  Shape s;
  bool given = false;
  if (auto it = in.fixed_shapes.find(n.name); it != in.fixed_shapes.end()) return it->second;
  if (auto it = in.shapes.find(n.name); it != in.shapes.end()) {
    s = it->second;
    given = true;
  } else if (auto a = n.attrs.find("__shape__"); a != n.attrs.end()) {
    try {
      s = parse_shape(a->second);
    } catch (const ValueError& e) {
      WEFT_THROW(ValueError) << node_label(g, nid) << ": bad __shape__ '" << a->second
                             << "': " << e.what();
    }
    if (s.ndim() == 0) s = Shape();  // "()" carries no information
    for (int i = 0; i < s.ndim(); ++i) {
      if (s[i] <= 0) s[i] = -1;
    }
  }
  if (in.batch > 0 && s.ndim() > 0 && (given || s[0] < 0)) s[0] = in.batch;
  return s;
}

// Note [Checked sizes] (base/shape.h): every shape inference starts from or produces is kept
// within weft's limits, so that op rules can multiply the dimensions of one shape without
// overflowing and a huge `__shape__`, input shape or attribute is an error naming the node.
void check_within_limits(const Graph& g, uint32_t nid, const Shape& s, const char* what) {
  if (!s.within_limits()) {
    WEFT_THROW(ShapeError)
        << "infer: " << node_label(g, nid) << ": " << what << " " << s.to_string()
        << " is too large (its dimensions multiply to more than 2^56 elements, weft's "
           "limit for one array)";
  }
}

// Where a variable's starting shape came from, for messages.
const char* initial_shape_source(const Graph& g, uint32_t nid, const InferInputs& in) {
  const std::string& name = g.nodes[nid].name;
  if (in.fixed_shapes.count(name)) return "bound array shape";
  if (in.shapes.count(name)) return "input shape";
  return "__shape__";
}

DType initial_dtype(const Graph& g, uint32_t nid, const InferInputs& in) {
  const Node& n = g.nodes[nid];
  if (auto it = in.dtypes.find(n.name); it != in.dtypes.end()) return it->second;
  if (auto a = n.attrs.find("__dtype__"); a != n.attrs.end()) {
    int64_t flag = -1;
    try {
      flag = parse_int(a->second);
    } catch (const ValueError&) {
      WEFT_THROW(ValueError) << node_label(g, nid) << ": bad __dtype__ '" << a->second << "'";
    }
    const DType t = static_cast<DType>(flag);
    WEFT_CHECK(flag >= 0 && std::string(dtype_name(t)) != "unknown")
        << node_label(g, nid) << ": unknown __dtype__ " << a->second;
    return t;
  }
  return DType::kUnknown;
}

// One application of a node's rules: gathers its entries, runs the op, writes back. Returns
// whether anything changed.
class Sweeper {
 public:
  Sweeper(const Graph& g, InferResult& r) : g_(g), r_(r) {}

  bool shapes(uint32_t nid) {
    const Node& n = g_.nodes[nid];
    gather(n, nid, r_.shapes, in_s_, out_s_);
    try {
      n.op->infer_shape(*n.op_attrs, in_s_, out_s_);
    } catch (const ShapeError& e) {
      WEFT_THROW(ShapeError) << node_label(g_, nid) << ": " << e.what();
    } catch (const ValueError& e) {
      WEFT_THROW(ValueError) << node_label(g_, nid) << ": " << e.what();
    }
    // Rules that write their vectors directly (not through assign_*_shape) are checked here.
    for (size_t i = 0; i < in_s_.size(); ++i)
      check_within_limits(g_, nid, in_s_[i], "inferred input shape");
    for (size_t o = 0; o < out_s_.size(); ++o)
      check_within_limits(g_, nid, out_s_[o], "inferred output shape");
    return scatter(n, nid, r_.shapes, in_s_, out_s_, "shape");
  }

  bool types(uint32_t nid) {
    const Node& n = g_.nodes[nid];
    gather(n, nid, r_.dtypes, in_t_, out_t_);
    try {
      n.op->infer_type(*n.op_attrs, in_t_, out_t_);
    } catch (const Error& e) {
      WEFT_THROW(ValueError) << node_label(g_, nid) << ": " << e.what();
    }
    return scatter(n, nid, r_.dtypes, in_t_, out_t_, "dtype");
  }

 private:
  template <typename T>
  void gather(const Node& n, uint32_t nid, const std::vector<T>& all, std::vector<T>& in,
              std::vector<T>& out) {
    in.clear();
    for (const NodeEntry& e : n.inputs) in.push_back(all[g_.entry_id(e)]);
    out.assign(all.begin() + g_.entry_id(nid, 0),
               all.begin() + g_.entry_id(nid, 0) + n.num_outputs());
  }

  static std::string text(const Shape& s) { return s.to_string(); }
  static std::string text(DType t) { return dtype_name(t); }
  static bool more_known(const Shape& now, const Shape& before) { return now != before; }
  static bool more_known(DType now, DType before) { return now != before; }

  template <typename T>
  bool scatter(const Node& n, uint32_t nid, std::vector<T>& all, const std::vector<T>& in,
               const std::vector<T>& out, const char* what) {
    bool changed = false;
    auto put = [&](uint32_t eid, const T& v, const char* role, size_t slot) {
      if (more_known(v, all[eid])) {
        // An op rule may refine an entry but must not contradict what is already known.
        check_refines(all[eid], v, nid, role, slot, what);
        all[eid] = v;
        changed = true;
      }
    };
    for (size_t i = 0; i < n.inputs.size(); ++i) put(g_.entry_id(n.inputs[i]), in[i], "input", i);
    for (size_t o = 0; o < out.size(); ++o)
      put(g_.entry_id(nid, static_cast<uint32_t>(o)), out[o], "output", o);
    return changed;
  }

  void check_refines(const Shape& before, const Shape& after, uint32_t nid, const char* role,
                     size_t slot, const char* what) {
    bool ok = true;
    if (before.rank_known()) {
      ok = after.ndim() == before.ndim();
      for (int i = 0; ok && i < before.ndim(); ++i) ok = before[i] < 0 || before[i] == after[i];
    }
    WEFT_CHECK_AS(ShapeError, ok) << node_label(g_, nid) << ": " << role << ' ' << slot << " "
                                  << what << " " << text(before) << " contradicts " << text(after);
  }
  void check_refines(DType before, DType after, uint32_t nid, const char* role, size_t slot,
                     const char* what) {
    WEFT_CHECK(before == DType::kUnknown || before == after)
        << node_label(g_, nid) << ": " << role << ' ' << slot << " " << what << " " << text(before)
        << " contradicts " << text(after);
  }

  const Graph& g_;
  InferResult& r_;
  std::vector<Shape> in_s_, out_s_;
  std::vector<DType> in_t_, out_t_;
};

bool all_known(const Shape& s) { return s.known(); }

// Every fully inferred entry must fit in the device's memory (InferInputs::device).
void check_fits(const Graph& g, const InferResult& r, Device device) {
  const size_t capacity = device_memory_capacity(device);
  if (capacity == 0) return;
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    for (int o = 0; o < g.nodes[nid].num_outputs(); ++o) {
      const uint32_t eid = g.entry_id(nid, o);
      if (!r.shapes[eid].known() || r.dtypes[eid] == DType::kUnknown) continue;
      const size_t bytes = shape_bytes(r.shapes[eid], dtype_size(r.dtypes[eid]), "infer");
      if (bytes > capacity) {
        WEFT_THROW(OutOfMemory) << "infer: " << node_label(g, nid) << " output " << o
                                << " of shape " << r.shapes[eid].to_string() << " "
                                << dtype_name(r.dtypes[eid]) << " needs " << bytes
                                << " bytes, more than " << to_string(device) << " has in total ("
                                << capacity << " bytes)";
      }
    }
  }
}

}  // namespace

InferResult infer_shapes_types(const Graph& g, const InferInputs& inputs, bool require_complete) {
  WEFT_CHECK(g.row_ptr().size() == g.nodes.size() + 1)
      << "infer: the graph is not indexed (call reindex())";
  for (const auto& [name, shape] : inputs.shapes) {
    WEFT_CHECK(g.find_variable(name) >= 0)
        << "infer: no input called '" << name << "' in the graph";
  }
  for (const auto& [name, shape] : inputs.fixed_shapes) {
    WEFT_CHECK(g.find_variable(name) >= 0)
        << "infer: no variable called '" << name << "' in the graph";
  }
  InferResult r;
  r.shapes.assign(g.num_entries(), Shape());
  r.dtypes.assign(g.num_entries(), DType::kUnknown);
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    if (!g.nodes[nid].is_variable()) continue;
    r.shapes[g.entry_id(nid, 0)] = initial_shape(g, nid, inputs);
    check_within_limits(g, nid, r.shapes[g.entry_id(nid, 0)], initial_shape_source(g, nid, inputs));
    r.dtypes[g.entry_id(nid, 0)] = initial_dtype(g, nid, inputs);
  }

  Sweeper sweep(g, r);
  auto run_to_fixed_point = [&] {
    // Forward then backward sweeps until a pair changes nothing. Each change makes some entry
    // strictly more known, so this ends; the cap only guards against a faulty op rule.
    const int kMaxPasses = 64;
    for (int pass = 0; pass < kMaxPasses; ++pass) {
      bool changed = false;
      for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
        if (g.nodes[nid].op) changed |= sweep.shapes(nid) | sweep.types(nid);
      }
      for (uint32_t nid = static_cast<uint32_t>(g.nodes.size()); nid-- > 0;) {
        if (g.nodes[nid].op) changed |= sweep.shapes(nid) | sweep.types(nid);
      }
      ++r.passes;
      if (!changed) return;
    }
  };
  run_to_fixed_point();
  // Variables no rule typed (labels, free inputs) default to float32, as in MXNet.
  bool defaulted = false;
  for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
    const uint32_t eid = g.entry_id(nid, 0);
    if (g.nodes[nid].is_variable() && r.dtypes[eid] == DType::kUnknown) {
      r.dtypes[eid] = DType::kFloat32;
      defaulted = true;
    }
  }
  if (defaulted) run_to_fixed_point();

  for (uint32_t eid = 0; eid < g.num_entries(); ++eid) {
    r.unknown_shapes += all_known(r.shapes[eid]) ? 0 : 1;
    r.unknown_dtypes += r.dtypes[eid] == DType::kUnknown ? 1 : 0;
  }
  if (inputs.device) check_fits(g, r, *inputs.device);
  if (require_complete && !r.complete()) {
    std::ostringstream missing;
    int listed = 0;
    for (uint32_t nid = 0; nid < g.nodes.size() && listed < 5; ++nid) {
      if (g.nodes[nid].is_variable() && !all_known(r.shapes[g.entry_id(nid, 0)])) {
        missing << (listed ? ", " : "") << "'" << g.nodes[nid].name << "' (node " << nid
                << ", known so far " << r.shapes[g.entry_id(nid, 0)].to_string() << ")";
        ++listed;
      }
    }
    if (listed > 0) {
      WEFT_THROW(ShapeError) << "infer: cannot infer every shape: supply the shape of input "
                             << missing.str() << " (e.g. --input NAME=1x3x224x224)";
    }
    for (uint32_t nid = 0; nid < g.nodes.size(); ++nid) {
      for (int o = 0; o < g.nodes[nid].num_outputs(); ++o) {
        const uint32_t eid = g.entry_id(nid, o);
        if (!all_known(r.shapes[eid]) || r.dtypes[eid] == DType::kUnknown) {
          WEFT_THROW(ShapeError) << "infer: " << node_label(g, nid) << " output " << o
                                 << " stays unknown (" << r.shapes[eid].to_string() << ", "
                                 << dtype_name(r.dtypes[eid]) << ")";
        }
      }
    }
  }
  return r;
}

}  // namespace weft::graph
