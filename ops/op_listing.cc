// Formats the operator registry for `weft ops` from the operator schema (ops/op_schema.h).
#include "ops/op_listing.h"

#include <sstream>

#include "ops/op_schema.h"

namespace weft {

std::string describe_op(const Op& op, bool verbose) {
  // Everything comes from the operator schema, the one Python, the C ABI and the docs read.
  const OpSchema s = op_schema(op);
  std::ostringstream os;
  os << s.name;
  if (!s.aliases.empty()) {
    os << " (aliases:";
    for (const auto& a : s.aliases) os << " " << a;
    os << ")";
  }
  if (!s.variadic_param.empty()) {
    os << "  inputs: (" << s.variadic_param << " of them)";
  } else if (!s.inputs_known) {
    os << "  inputs: (depend on params)";
  } else {
    os << "  inputs:";
    for (const auto& n : s.inputs) os << " " << n;
  }
  if (s.num_outputs >= 0) {
    os << "  outputs:";
    for (const auto& n : s.outputs) os << " " << n;
    if (!s.outputs_depend_on.empty()) {
      os << " (count depends on";
      for (const auto& p : s.outputs_depend_on) os << " " << p;
      os << ")";
    }
  }
  os << "  kernels:" << (s.cpu_kernel ? " cpu" : "") << (s.cuda_kernel ? " cuda" : "");
  os << (s.has_gradient ? "  gradient: yes" : "  gradient: no");
  if (verbose) {
    if (!s.description.empty()) os << "\n    " << s.description;
    for (const auto& p : s.params) {
      os << "\n    " << p.name << " : " << p.type;
      os << (p.required ? ", required" : ", default " + p.default_text);
      if (!p.description.empty()) os << " -- " << p.description;
    }
  }
  return os.str();
}

std::string describe_registry(bool verbose, bool include_backward) {
  std::ostringstream os;
  int count = 0;
  for (const Op* op : OpRegistry::global().list()) {
    if (!include_backward && op->name().rfind("_backward", 0) == 0) continue;
    os << describe_op(*op, verbose) << "\n";
    ++count;
  }
  os << count << " operators\n";
  return os.str();
}

}  // namespace weft
