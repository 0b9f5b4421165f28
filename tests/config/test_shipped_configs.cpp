// Every config shipped in configs/ (and configs/variants/) loads (load_config validates every
// section) and names data that exists: a recipe the README points at must not fail on its
// first line.
#include <catch2/catch.hpp>
#include <filesystem>
#include <vector>

#include "config/config.hpp"
#include "support/common.hpp"

using namespace qkv;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> tomls_in(const std::string& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(testing::source_path(dir)))
    if (e.path().extension() == ".toml") out.push_back(e.path());
  return out;
}

}  // namespace

TEST_CASE("every shipped config loads and finds its data") {
  const auto top = tomls_in("configs");
  const auto variants = tomls_in("configs/variants");
  REQUIRE(top.size() >= 9);
  REQUIRE(variants.size() >= 4);
  for (const auto* list : {&top, &variants})
    for (const auto& path : *list) {
      INFO(path.string());
      config::RunConfig c;
      REQUIRE_NOTHROW(c = config::load_config(path.string()));
      if (!c.data.path.empty()) CHECK(fs::exists(c.data.path));
    }
}
