// Every config shipped in configs/ (and configs/variants/) loads, validates and names data that
// exists: a recipe the README points at must not fail on its first line.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "config/config.hpp"
#include "support/common.hpp"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

std::set<fs::path> shipped_configs() {
  std::set<fs::path> out;
  for (const char* dir : {"configs", "configs/variants"})
    for (const auto& e : fs::directory_iterator(testing::source_path(dir)))
      if (e.path().extension() == ".toml") out.insert(e.path());
  return out;
}

}  // namespace

TEST_CASE("every shipped config loads, validates and finds its data") {
  const auto configs = shipped_configs();
  REQUIRE(configs.size() >= 10);
  for (const auto& path : configs) {
    INFO(path.string());
    config::RunConfig c;
    REQUIRE_NOTHROW(c = config::load_config(path.string()));
    REQUIRE_NOTHROW(c.validate());
    if (!c.data.path.empty()) CHECK(fs::exists(c.data.path));
  }
}
