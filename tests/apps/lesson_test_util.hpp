// Helpers for the lesson command tests: run the qkv binary, temp folders, PNG decoding.
#pragma once
#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "test_util.hpp"

namespace qkv::lesson_test {

inline std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}
inline std::string qkv_binary() { return env_or("QKV_BUILD_DIR", ".") + "/apps/qkv"; }
inline std::string source_dir() { return env_or("QKV_SOURCE_DIR", "."); }

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

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

using qkv::test::TempDir;

}  // namespace qkv::lesson_test
