// Parsed operator attributes, made once and shared: make_op_attrs parses, cached_op_attrs keeps a
// thread's recent parses by op name and attribute map (Note [Attribute cache] in attr_cache.cc).
// Every caller that names an op by string (C++ invoke, the C ABI, Python) goes through here.
#pragma once

#include <memory>
#include <string_view>

#include "ops/op.h"

namespace weft {

/// Parses `attrs` for the op called `op` (name or alias). Throws ValueError for an unknown op or
/// a bad attribute, naming both.
std::shared_ptr<const OpAttrs> make_op_attrs(std::string_view op, const AttrMap& attrs = {});

/// make_op_attrs, shared with this thread's recent calls that gave the same op name and map, so
/// a repeated call parses nothing and keeps hitting the inference caches keyed by the attributes'
/// address. Operators with a run-time parameter schema are parsed anew every time.
std::shared_ptr<const OpAttrs> cached_op_attrs(std::string_view op, const AttrMap& attrs);

}  // namespace weft
