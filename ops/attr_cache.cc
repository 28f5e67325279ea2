// The attribute cache shared by every by-name caller.
#include "ops/attr_cache.h"

#include <string>

namespace weft {

std::shared_ptr<const OpAttrs> make_op_attrs(std::string_view op, const AttrMap& attrs) {
  return std::make_shared<const OpAttrs>(get_op(op).make_attrs(attrs));
}

// Note [Attribute cache]
// A call by name (invoke("_plus_scalar", {a}, {{"scalar", "1"}}), the scalar operators, the C
// ABI's weft_invoke, the Python frontends) would parse its attributes on every call, and the
// fresh OpAttrs would then miss the inference cache, which is keyed by the attributes' address
// (Note [Inference cache] in ndarray/invoke.cc). Each thread keeps its last few parsed
// attributes by op name and attribute map: a repeated call shares them. Parsing is a pure
// function of the two for built-in ops; operators whose parameters a foreign schema parses
// (Op::has_runtime_params) are parsed anew each time.
std::shared_ptr<const OpAttrs> cached_op_attrs(std::string_view op, const AttrMap& attrs) {
  struct Entry {
    std::string op;
    AttrMap attrs;
    std::shared_ptr<const OpAttrs> parsed;
  };
  constexpr int kEntries = 8;
  thread_local Entry entries[kEntries];
  thread_local int next = 0;
  for (const Entry& e : entries) {
    if (e.parsed && e.op == op && e.attrs == attrs) return e.parsed;
  }
  std::shared_ptr<const OpAttrs> parsed = make_op_attrs(op, attrs);
  if (!parsed->op->has_runtime_params()) {
    Entry& e = entries[next];
    next = (next + 1) % kEntries;
    e.op.assign(op);
    e.attrs = attrs;
    e.parsed = parsed;
  }
  return parsed;
}

}  // namespace weft
