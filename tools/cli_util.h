// Command-line checks shared by the `weft` subcommands: strict CLI11 validators for integers,
// tolerances and devices, the --input spec parser, the progress bar drawn only on a terminal, and
// --plugin loading.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/device.h"
#include "base/shape.h"

namespace weft::tools {

// Note [Strict numeric flags]
// CLI11 converts integers with strtoll(..., base 0): "010" is octal 8, "0x10" is 16, an overflowing
// value saturates to INT64_MAX (accepted for an int64_t flag) and "-1" wraps to 2^64 - 1 for an
// unsigned one. The validators below run on the text before that conversion: they accept plain
// decimal integers only, check the range, and rewrite the text to its canonical decimal form, so
// CLI11's conversion sees exactly the value that was checked. A failure is CLI11's
// ValidationError, "--flag: message", exit code 105. Add them with Option::transform() (check()
// would discard the rewritten text).

/// A decimal integer in [min, max], for Option::transform(). A value; use from one thread.
CLI::Validator integer_in(int64_t min, int64_t max);
/// A decimal integer in [0, 2^64 - 1] (seeds).
CLI::Validator unsigned_integer();
/// A finite floating-point number >= 0 (tolerances; "nan", "inf" and negatives are rejected).
CLI::Validator non_negative_finite();
/// A device weft::parse_device() accepts ("cpu", "cuda:1", ...).
CLI::Validator device_text();

/// The device `text` names (already checked by device_text()), checked to be one this build and
/// machine can run a graph on: the CPU, or a present CUDA device of a CUDA build. Throws
/// ValueError naming `flag` and the text otherwise (cuda_host, CUDA without CUDA support or
/// without that device).
Device runnable_device(const std::string& flag, const std::string& text);

/// Adds the repeatable `--plugin PATH` flag to `app`, collecting the paths into `paths` (which
/// must outlive the parse). Each occurrence takes one path.
void add_plugin_option(CLI::App& app, std::vector<std::string>& paths);

/// Loads each plugin library in order with load_plugin (which registers its operators), so
/// that a graph using them can be parsed afterwards. A path without '/' is a file in the current
/// directory (no library search). Throws ValueError "--plugin: ..." with weft's
/// message, which names the file and the reason (missing, not a weft plugin, another ABI
/// version, its init failed). Plugins stay loaded for the life of the process. Thread-safe.
void load_plugins(const std::vector<std::string>& paths);

/// One `--input NAME=VALUE` flag: a shape, or a .npy file to load.
struct InputSpec {
  std::string name;
  std::optional<Shape> shape;  ///< set for NAME=SHAPE
  std::string file;            ///< set for NAME=FILE.npy
};

/// Parses "NAME=1x3x224x224", "NAME=(1,3,224,224)", "NAME=[1, 3]" or "NAME=FILE.npy". Shapes
/// are 1 to 32 positive decimal dimensions whose product is within weft's limit for one array
/// (Shape::size()). Throws ValueError naming the flag and the spec otherwise. Thread-safe.
InputSpec parse_input_spec(const std::string& spec);

/// A shape written as "1x3x224x224", "(1,3,224,224)" or "[1, 3, 224, 224]", checked as above;
/// errors name the text. Thread-safe.
Shape parse_shape_spec(const std::string& text);

/// Whether interactive output (a progress bar redrawn with '\r') is wanted: stdout and stderr
/// are both terminals. Thread-safe.
bool interactive_terminal();

/// A progress bar on stderr, drawn only when `enabled` (normally interactive_terminal()); when
/// output goes to a file or a pipe, it prints nothing. Call from one thread.
class ProgressBar {
 public:
  ProgressBar(int total, bool enabled) : total_(total), enabled_(enabled) {}
  /// Redraws the bar at `done` of the total; ends the line when done == total.
  void update(int done);

 private:
  int total_;
  bool enabled_;
};

}  // namespace weft::tools
