// Runs the built `weft` program (WEFT_CLI_PATH) for the command-line tests and captures what it
// prints and how it ended.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace weft::testing {

/// How one run of `weft` ended.
struct CliRun {
  int code = -1;       ///< exit status; -1 when it did not exit normally
  int signal = 0;      ///< the signal that ended it, if one did
  std::string output;  ///< stdout and stderr together (stderr unless `merge_stderr` is false)
};

/// Runs `weft ARGS` through the shell (ARGS is shell text), stdout and stderr into one pipe
/// unless `merge_stderr` is false (then stderr goes to /dev/null). Call from one thread.
inline CliRun run_cli(const std::string& args, bool merge_stderr = true) {
  CliRun r;
#ifdef WEFT_CLI_PATH
  const std::string cmd =
      std::string(WEFT_CLI_PATH) + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  if (WIFEXITED(status)) {
    r.code = WEXITSTATUS(status);
    // The shell reports a child killed by signal S as exit status 128 + S.
    if (r.code > 128) r.signal = r.code - 128;
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
#else
  (void)args;
  (void)merge_stderr;
#endif
  return r;
}

}  // namespace weft::testing
