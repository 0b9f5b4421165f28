// qkv bench --attention-sweep through the real binary: every method gives a point per n with
// a time and a peak memory, and the figure is written.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/process.hpp"

using namespace qkv::testing;

TEST_CASE("bench --attention-sweep: a point per method and n, and the figure") {
  const std::string fig = (std::filesystem::temp_directory_path() /
                           ("qkv_sweep_" + std::to_string(::getpid()) + ".svg"))
                              .string();
  const RunResult r = run_qkv(
      "bench --attention-sweep --max-n 512 --min-seconds 0 --threads 1 --json --figure " + fig);
  INFO(r.output);
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  REQUIRE(j["points"].size() == 10);  // 5 methods x n in {256, 512}
  for (const auto& p : j["points"]) {
    INFO(p.dump());
    CHECK_FALSE(p.contains("error"));
    CHECK(p["ms"].get<double>() > 0);
    CHECK(p["peak_rss_mb"].get<double>() > 0);
  }
  std::ifstream in(fig);
  std::stringstream svg;
  svg << in.rdbuf();
  CHECK(svg.str().find("linear-causal") != std::string::npos);
  CHECK(svg.str().rfind("</svg>") != std::string::npos);
  std::filesystem::remove(fig);
}
