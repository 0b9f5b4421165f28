// The qkv binary in tests: run it and capture its output, or start it in the background.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <vector>

#include "support/common.hpp"

namespace qkv::testing {

inline std::string qkv_binary() { return env_or("QKV_BUILD_DIR", ".") + "/apps/qkv"; }

// A shipped config's path, quoted for the shell: configs/NAME under the source tree. (Built
// with += : gcc 12 warns falsely about "'" + std::string.)
inline std::string shipped_config(const std::string& name) {
  std::string s(1, '\'');
  s += source_dir();
  s += "/configs/";
  s += name;
  s += '\'';
  return s;
}

struct RunResult {
  int status = -1;     // exit code
  std::string output;  // stdout and stderr
};

// The tests' build of qkv: the same binary with tests/support's injected gradcheck faults.
inline std::string qkv_with_faults_binary() {
  return env_or("QKV_BUILD_DIR", ".") + "/tests/apps/qkv_with_faults";
}

// Runs `qkv ARGS` (a shell-quoted argument string) and captures its output; binary: another
// build of qkv (qkv_with_faults_binary()).
inline RunResult run_qkv(const std::string& args, const std::string& binary = qkv_binary()) {
  RunResult r;
  // appended piecewise: GCC 12 warns (-Wrestrict, falsely) on "'" + std::string
  std::string cmd(1, '\'');
  cmd.append(binary).append("' ").append(args).append(" 2>&1");
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// Starts the program bin with args in the background (fork and exec, no shell), stdout and
// stderr into out_file; returns its pid (wait with waitpid).
inline pid_t spawn_program(std::string bin, std::vector<std::string> args,
                           const std::string& out_file = "/dev/null") {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv = {bin.data()};
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (!std::freopen(out_file.c_str(), "w", stdout) || ::dup2(fileno(stdout), 2) < 0) ::_exit(126);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// Starts `qkv ARGS` in the background (spawn_program).
inline pid_t spawn_qkv(std::vector<std::string> args, const std::string& out_file = "/dev/null") {
  return spawn_program(qkv_binary(), std::move(args), out_file);
}

// The exit code of pid once it ends (128 + N when a signal N ended it), waiting at most
// `seconds`; past that it is killed (SIGKILL) and -1 is returned.
inline int wait_exit_within(pid_t pid, double seconds) {
  int st = 0;
  for (int i = 0; i < static_cast<int>(seconds * 50); ++i) {
    if (::waitpid(pid, &st, WNOHANG) == pid)
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    ::usleep(20000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &st, 0);
  return -1;
}

// Whether the process pid still exists (a zombie counts as ended).
inline bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

}  // namespace qkv::testing
