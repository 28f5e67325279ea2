// The C ABI: the registry's operator schemas as JSON (weft_op_schema), the same schema Python's
// generated functions, `weft ops` and docs/OPERATORS.md read.
#include "capi/c_api_internal.h"
#include "ops/op_schema.h"

using namespace weft;        // NOLINT(google-build-using-namespace)
using namespace weft::capi;  // NOLINT(google-build-using-namespace)

extern "C" {

int weft_op_schema(const char* name, const char** json_out) {
  WEFT_C_BEGIN
  require(json_out, "json_out");
  *json_out = nullptr;
  // One string per thread, replaced by the next call: the documented lifetime of *json_out.
  thread_local std::string text;
  if (name == nullptr || name[0] == '\0') {
    text = registry_schema_json();
  } else {
    text = op_schema_json(op_schema(get_op(name)));
  }
  *json_out = text.c_str();
  WEFT_C_END("weft_op_schema")
}

}  // extern "C"
