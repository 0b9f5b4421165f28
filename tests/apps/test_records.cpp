// Every record qkv reads from a file, one case per kind, nested far past the bound of
// core/bounded_json.hpp (and a config nested past its own): refused with one line naming the
// file, or skipped where a reader skips damaged records, never a crash. A record of 100,000
// levels parsed whole and then copied or written out overflowed the stack (a SIGSEGV).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "config/document.hpp"
#include "figures/report.hpp"
#include "nn/safetensors.hpp"
#include "runfolder/integrity.hpp"
#include "runfolder/provenance.hpp"
#include "serve/run_files.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kDeep = 100000;

// A JSON array nested `levels` deep.
std::string nested(int64_t levels) {
  return std::string(static_cast<size_t>(levels), '[') + "1" +
         std::string(static_cast<size_t>(levels), ']');
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("records: a deep metrics line is skipped by the server's reader and by the report's") {
  TempDir t("records_metrics");
  const fs::path run = t.path / "run";
  fs::create_directories(run);
  write(run / "config.toml", "seed = 1\n");
  write(run / "metrics.jsonl", "{\"step\": 1, \"loss\": 3}\n{\"step\": 2, \"x\": " + nested(kDeep) +
                                   "}\n{\"step\": 3, \"loss\": 2}\n");
  const nlohmann::json j = serve::read_metrics(serve::served_runs({run.string()})[0], 0, -1);
  REQUIRE(j["records"].size() == 2);
  CHECK(j["records"][1]["step"] == 3);
  CHECK(j["skipped"] == 1);
  CHECK(j.dump().size() < 200);  // writing the answer out recurses per level
  figures::report::RunData r;
  figures::report::read_metrics((run / "metrics.jsonl").string(), r);
  CHECK(r.records.size() == 2);
  CHECK(r.bad_lines == 1);
  REQUIRE(!r.missing.empty());
  CHECK(r.missing.back() ==
        "1 line(s) of metrics.jsonl are not JSON records and were skipped (the first, line 2: "
        "nested deeper than 64 levels)");
}

TEST_CASE("records: a deep safetensors header is a corrupt header") {
  const std::string header = "{\"__metadata__\": {\"x\": " + nested(kDeep) + "}}";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[static_cast<size_t>(i)] = static_cast<char>(header.size() >> (8 * i));
  bytes += header;
  CHECK_THROWS_WITH(nn::parse_safetensors(bytes, "m.safetensors"),
                    "m.safetensors: corrupt safetensors header: nested deeper than 64 levels");
}

TEST_CASE("records: a deep checkpoint manifest is a corrupt manifest") {
  TempDir t("records_manifest");
  write(t.path / "manifest.json", "{\"algorithm\": \"xxh3-64\", \"files\": " + nested(kDeep) + "}");
  CHECK_THROWS_WITH(run::read_checkpoint_files(t.path.string()),
                    (t.path / "manifest.json").string() +
                        ": corrupt checkpoint manifest: nested deeper than 64 levels");
}

TEST_CASE("records: a deep provenance.json is a damaged one: no comparison, no crash") {
  TempDir t("records_provenance");
  write(t.path / "provenance.json", "{\"kernels\": " + nested(kDeep) + "}");
  CHECK(run::read_provenance(t.path.string()).is_null());
  CHECK(run::kernel_change(t.path.string(), "eval").empty());
}

TEST_CASE("records: a deep saturation.json is not a saturation result") {
  TempDir t("records_saturation");
  write(t.path / "saturation.json", "{\"records\": [], \"settings\": " + nested(kDeep) + "}");
  const figures::report::StudyKind* kind = figures::report::study_kind_of(t.path.string());
  REQUIRE(kind != nullptr);
  CHECK_THROWS_WITH(figures::report::read_study(t.path.string(), *kind),
                    Catch::Contains("saturation.json: not a qkv saturation result"));
}

TEST_CASE("records: a config nested past its bound is one line naming the file and line") {
  const std::string dots = [] {
    std::string s = "a";
    for (int i = 0; i < kDeep; ++i) s += ".a";
    return s;
  }();
  // toml++ recurses once per dotted part while it parses: refused before it sees the line
  CHECK_THROWS_WITH(config::parse_config("seed = 1\n" + dots + " = 1\n", "deep.toml"),
                    Catch::StartsWith("deep.toml:2:") &&
                        Catch::Contains("more than 256 dots on one line outside strings"));
  CHECK_THROWS_WITH(config::parse_config("[" + dots + "]\nx = 1\n", "deep.toml"),
                    Catch::StartsWith("deep.toml:1:"));
  // within toml++'s bounds, deeper than any key of a run: refused while converted
  std::string forty = "a";
  for (int i = 0; i < 40; ++i) forty += ".a";
  CHECK_THROWS_WITH(config::parse_config(forty + " = 1\n", "deep.toml"),
                    "deep.toml:1: a: tables or arrays nested deeper than 16 levels, which no qkv "
                    "key takes");
  CHECK_THROWS_WITH(config::parse_config("x = " + nested(200) + "\n", "deep.toml"),
                    Catch::Contains("nested deeper than 16 levels"));
  // strings hold any number of dots
  CHECK(config::parse_config("x = \"" + dots + "\"\n", "s.toml").root["x"] == dots);
}
