// Shared by the data tests: scratch files and source-tree paths.
#pragma once
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace qkv::data::testing {

// A fresh path under the build (or temp) dir, unique per process and name.
inline std::string scratch(const std::string& name) {
  const char* b = std::getenv("QKV_BUILD_DIR");
  std::filesystem::path dir = b ? std::filesystem::path(b) / "test-scratch" / "data"
                                : std::filesystem::temp_directory_path() / "qkv-data-tests";
  std::filesystem::create_directories(dir);
  return (dir / (std::to_string(::getpid()) + "-" + name)).string();
}

inline std::string write_file(const std::string& name, const std::string& content) {
  const std::string p = scratch(name);
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

inline std::string source_path(const std::string& rel) {
  const char* s = std::getenv("QKV_SOURCE_DIR");
  return (std::filesystem::path(s ? s : ".") / rel).string();
}

}  // namespace qkv::data::testing
