// What every test area shares (namespace qkv::testing, as all of tests/support): skipping (also
// where bf16 products cannot run), temporary folders, scoped thread counts, files in the source
// tree and scratch files.
#pragma once
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/parallel.hpp"
#include "core/precision.hpp"

namespace qkv::testing {

// The exit status of a test process whose every test case was skipped (tests/test_main.cpp);
// qkv_test() gives it to ctest as SKIP_RETURN_CODE, so ctest reports "Skipped", not "Passed".
inline constexpr int kSkipExitCode = 77;

// Prints "SKIPPED: <test case>: <reason>" and marks the running test case as skipped
// (defined in test_main.cpp). Use QKV_SKIP, which also ends the test case.
void mark_skipped(const std::string& reason);

// Ends the running test case as skipped, with the reason. Only in a TEST_CASE's own body (it
// returns from the enclosing function), and only for what cannot run here (a missing program,
// a sanitizer build), never for a result that is inconvenient.
#define QKV_SKIP(reason)                  \
  do {                                    \
    ::qkv::testing::mark_skipped(reason); \
    return;                               \
  } while (0)

// Ends the running test case as skipped where bf16 products cannot run (bf16_unsupported_reason
// names why). Only where QKV_SKIP may stand.
#define SKIP_WITHOUT_BF16()                                              \
  do {                                                                   \
    const std::string why = ::qkv::bf16_unsupported_reason();            \
    if (!why.empty()) QKV_SKIP("bf16 products cannot run here: " + why); \
  } while (0)

// A fresh folder under the system temp dir, qkv_<tag>_<pid>, removed when the object dies.
// The pid keeps test processes that ctest runs in parallel apart.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    path =
        std::filesystem::temp_directory_path() / ("qkv_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// Restores the thread count when a test ends, whatever happens.
struct ThreadGuard {
  int saved = get_num_threads();
  ThreadGuard() = default;
  ThreadGuard(const ThreadGuard&) = delete;
  ThreadGuard& operator=(const ThreadGuard&) = delete;
  ~ThreadGuard() { set_num_threads(saved); }
};

// Runs the enclosed code on n threads, then restores the previous count.
struct ScopedThreads : ThreadGuard {
  explicit ScopedThreads(int n) { set_num_threads(n); }
};

// The environment variable name, or fallback when it is unset.
inline std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}
// The source tree and a path in it (QKV_SOURCE_DIR, set by tests/test_main.cpp).
inline std::string source_dir() { return env_or("QKV_SOURCE_DIR", "."); }
inline std::string source_path(const std::string& rel) {
  return (std::filesystem::path(source_dir()) / rel).string();
}

// The whole file as bytes ("" when it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh path under the build (or temp) dir, unique per process and name.
inline std::string scratch(const std::string& name) {
  const char* b = std::getenv("QKV_BUILD_DIR");
  std::filesystem::path dir = b ? std::filesystem::path(b) / "test-scratch" / "data"
                                : std::filesystem::temp_directory_path() / "qkv-data-tests";
  std::filesystem::create_directories(dir);
  return (dir / (std::to_string(::getpid()) + "-" + name)).string();
}

// Writes content to scratch(name); returns that path.
inline std::string write_file(const std::string& name, const std::string& content) {
  const std::string p = scratch(name);
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

}  // namespace qkv::testing
