// `weft info` (placeholder until implemented).
#include "tools/commands.h"

namespace weft::tools {

Command add_info_command(CLI::App& app) {
  Command c;
  c.app = app.add_subcommand("info", "(not implemented yet)");
  c.run = [] { return 2; };
  return c;
}

}  // namespace weft::tools
