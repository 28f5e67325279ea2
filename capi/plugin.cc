// Plugins: load_plugin for C++ callers (the weft tool, the Python package) and the C ABI's
// weft_load_plugin over it. A plugin is a shared library exporting `weft_plugin_abi_version` and
// `weft_plugin_init`; it registers its operators through the function table it is handed, so it
// need not link weft at all. Plugins are never unloaded: the operators they register live as long
// as the process (Note [Runtime registration] in ops/op.cc).
#include "capi/plugin.h"

#include <dlfcn.h>

#include <mutex>
#include <set>
#include <string>

#include "capi/c_api_internal.h"

namespace weft::capi {
namespace {

const weft_plugin_api& plugin_api() {
  static const weft_plugin_api api = [] {
    weft_plugin_api a{};
    a.abi_version = WEFT_C_ABI_VERSION;
    a.struct_size = sizeof(weft_plugin_api);
    a.last_error = &weft_last_error;
    a.set_error = &weft_set_error;
    a.register_op = &weft_register_op;
    a.complete = &weft_complete;
    a.current_context = &weft_current_context;
    a.attrs_get_string = &weft_attrs_get_string;
    a.attrs_get_int = &weft_attrs_get_int;
    a.attrs_get_float = &weft_attrs_get_float;
    a.attrs_get_shape = &weft_attrs_get_shape;
    return a;
  }();
  return api;
}

}  // namespace
}  // namespace weft::capi

namespace weft {

void load_plugin(const std::string& path) {
  // One load at a time; a library already initialised is not initialised again.
  static std::mutex mutex;
  static std::set<void*> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    WEFT_THROW(ValueError) << "plugin '" << path
                           << "' could not be loaded: " << (why != nullptr ? why : "dlopen failed");
  }
  if (loaded.count(lib) != 0) {
    dlclose(lib);  // drops the reference this call added
    return;
  }
  const auto* version = static_cast<const uint32_t*>(dlsym(lib, "weft_plugin_abi_version"));
  auto init = reinterpret_cast<weft_plugin_init_fn>(dlsym(lib, "weft_plugin_init"));
  if (version == nullptr || init == nullptr) {
    dlclose(lib);
    WEFT_THROW(ValueError) << "plugin '" << path << "' is not a weft plugin: it does not export "
                           << (version == nullptr ? "weft_plugin_abi_version" : "weft_plugin_init")
                           << " (declare it with WEFT_PLUGIN_ABI and define weft_plugin_init)";
  }
  if (*version != WEFT_C_ABI_VERSION) {
    const uint32_t v = *version;
    dlclose(lib);
    WEFT_THROW(ValueError) << "plugin '" << path << "' was built for weft C ABI version " << v
                           << "; this weft implements version " << WEFT_C_ABI_VERSION
                           << ": rebuild the plugin against this weft's c_api.h";
  }
  capi::take_foreign_error();
  const int rc = init(&capi::plugin_api());
  loaded.insert(lib);  // kept loaded even on failure: it may have registered some operators
  if (rc != 0) {
    std::string msg = capi::take_foreign_error();
    if (msg.empty()) msg = "returned " + std::to_string(rc) + " without set_error";
    WEFT_THROW(Error) << "plugin '" << path << "': weft_plugin_init failed: " << msg;
  }
}

}  // namespace weft

using namespace weft;  // NOLINT(google-build-using-namespace)

extern "C" {

int weft_load_plugin(const char* path) {
  WEFT_C_BEGIN
  capi::require(path, "path");
  load_plugin(path);
  WEFT_C_END("weft_load_plugin")
}

}  // extern "C"
