// atomic_write_file: a file is replaced whole or not at all, and no temporary is left behind.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "support/common.hpp"

using namespace qkv;
using qkv::testing::TempDir;

namespace {

std::string read_back(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t files_in(const std::filesystem::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("atomic_write_file: writes, replaces whole, and leaves no temporary") {
  const TempDir dir("atomic_write");
  const std::string path = dir.file("a.txt");
  atomic_write_file(path, std::string("first\0with a zero byte", 22));
  CHECK(read_back(path) == std::string("first\0with a zero byte", 22));
  atomic_write_file(path, "2");  // shorter: nothing of the old content survives
  CHECK(read_back(path) == "2");
  atomic_write_file(path, "");
  CHECK(std::filesystem::file_size(path) == 0);
  CHECK(files_in(dir.path) == 1);
}

TEST_CASE("atomic_write_file: a folder that does not exist is an error naming the file") {
  const TempDir dir("atomic_write_missing");
  const std::string path = dir.file("no/such/folder/a.txt");
  CHECK_THROWS_WITH(atomic_write_file(path, "x"),
                    Catch::Contains("no/such/folder/a.txt") && Catch::StartsWith("write: "));
  CHECK(files_in(dir.path) == 0);
}

TEST_CASE("atomic_write_file: a failed rename leaves the old file and no temporary") {
  const TempDir dir("atomic_write_rename");
  // The target is a non-empty folder: the temporary is written, the rename over it fails.
  const std::string target = dir.file("taken");
  std::filesystem::create_directories(target + "/inside");
  CHECK_THROWS_WITH(atomic_write_file(target, "x"), Catch::Contains("cannot move"));
  CHECK(std::filesystem::is_directory(target + "/inside"));
  CHECK(files_in(dir.path) == 1);
}
