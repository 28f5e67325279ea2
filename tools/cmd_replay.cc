// `weft replay` (placeholder until implemented).
#include "tools/commands.h"

namespace weft::tools {

Command add_replay_command(CLI::App& app) {
  Command c;
  c.app = app.add_subcommand("replay", "(not implemented yet)");
  c.run = [] { return 2; };
  return c;
}

}  // namespace weft::tools
