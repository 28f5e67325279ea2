// Formats the operator registry for `weft ops`.
#include "ops/op_listing.h"

#include <sstream>

namespace weft {

std::string describe_op(const Op& op, bool verbose) {
  std::ostringstream os;
  os << op.name();
  if (!op.aliases().empty()) {
    os << " (aliases:";
    for (const auto& a : op.aliases()) os << " " << a;
    os << ")";
  }
  // Arity and names need parsed attributes; use the defaults when every param has one.
  bool all_defaults = true;
  for (const auto& p : op.param_info_list()) all_defaults = all_defaults && !p.required;
  if (all_defaults) {
    try {
      OpAttrs a = op.make_attrs({});
      os << "  inputs:";
      for (const auto& n : op.input_names(a)) os << " " << n;
      os << "  outputs:";
      for (const auto& n : op.output_names(a)) os << " " << n;
    } catch (const std::exception&) {
      os << "  inputs: (depend on params)";
    }
  } else {
    os << "  inputs: (depend on params)";
  }
  os << "  kernels:" << (op.has_kernel(DeviceType::kCPU) ? " cpu" : "")
     << (op.has_kernel(DeviceType::kCUDA) ? " cuda" : "");
  os << (op.attr<FGradient>() ? "  gradient: yes" : "  gradient: no");
  if (verbose) {
    if (!op.description().empty()) os << "\n    " << op.description();
    for (const auto& p : op.param_info_list()) {
      os << "\n    " << p.name << " : " << p.type;
      os << (p.required ? ", required" : ", default " + p.default_value);
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
