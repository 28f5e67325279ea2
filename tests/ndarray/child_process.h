// Test helpers for lifetime tests: a watchdog that fails a deadlocked test instead of hanging it,
// and running this test program again as a child process (exit behaviour).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace weft::testing {

// Ends the whole test program with a failure when `what` has not finished within `limit`: a
// deadlock must fail the test, not hang it until the harness gives up.
class Watchdog {
 public:
  Watchdog(std::chrono::seconds limit, std::string what)
      : what_(std::move(what)), thread_([this, limit] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!done_cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: %s did not finish within %lld s (deadlock)\n",
                         what_.c_str(), static_cast<long long>(limit.count()));
            std::fflush(stderr);
            std::_Exit(3);
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

// Runs this test program again with only `test` selected and `mode` in the environment variable
// `env_name`; returns its wait status (from waitpid) and its output. Kills it and fails the
// calling test when it has not exited within 100 s (a hang at exit).
inline int run_child(const std::string& test, const char* env_name, const std::string& mode,
                     std::string& output) {
  char out_path[] = "/tmp/weft_lifetime_child_XXXXXX";
  const int fd = mkstemp(out_path);
  if (fd < 0) {
    ADD_FAILURE() << "mkstemp failed";
    return -1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, 1);
  posix_spawn_file_actions_adddup2(&actions, fd, 2);
  const std::string filter = "--gtest_filter=" + test;
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, env_name, std::strlen(env_name)) != 0) env_storage.emplace_back(*e);
  }
  env_storage.push_back(std::string(env_name) + "=" + mode);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  std::vector<char*> argv{exe.data(), const_cast<char*>(filter.c_str()), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fd);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn failed: " << std::strerror(rc);
    std::remove(out_path);
    return -1;
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(100);
  for (;;) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "the child did not exit within 100 s (a hang at exit)";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::ifstream in(out_path);
  std::stringstream text;
  text << in.rdbuf();
  output = text.str();
  std::remove(out_path);
  return status;
}

/// "exit status N" or "killed by signal N" for a wait status.
inline std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  return "status " + std::to_string(status);
}

}  // namespace weft::testing
