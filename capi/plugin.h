// Loading plugins from C++: shared libraries that register operators through the C ABI's function
// table (include/weft/c_api.h, "Plugins"). weft_load_plugin wraps load_plugin.
#pragma once

#include <string>

namespace weft {

/// Loads the plugin library at `path` (dlopen's lookup: a name without a slash is searched on the
/// library path) and runs its weft_plugin_init, which registers its operators. A library loaded
/// before is not initialised again. Plugins are never unloaded: the operators they register live
/// as long as the process. Thread-safe (one load at a time). Throws ValueError naming the path
/// when the library cannot be loaded, is not a weft plugin or was built for another C ABI
/// version; Error naming the path and the plugin's message when its init fails (the library stays
/// loaded: it may have registered some operators).
void load_plugin(const std::string& path);

}  // namespace weft
