// serve/run_files: the folders qkv serve names, the files it lets out of them, and metrics.jsonl
// read while a training appends to it (complete lines only).
#include <catch2/catch.hpp>

#include <fstream>

#include "serve/run_files.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::serve;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& text, std::ios::openmode mode = std::ios::trunc) {
  std::ofstream f(p, std::ios::binary | mode);
  f << text;
}

ServedRun run_in(const TempDir& t, const std::string& name) {
  fs::create_directories(t.path / name / "sub");
  write(t.path / name / "config.toml", "seed = 1\n");
  write(t.path / name / "sub" / "chart.svg", "<svg/>");
  return served_runs({(t.path / name).string()})[0];
}

}  // namespace

TEST_CASE("serve: run folders are named by their folder, repeated names made unique") {
  TempDir t("serve_names");
  run_in(t, "a");
  fs::create_directories(t.path / "x" / "a");
  write(t.path / "x" / "a" / "config.toml", "");
  fs::create_directories(t.path / "sat");
  write(t.path / "sat" / "saturation.json", "{}");
  const auto runs = served_runs(
      {(t.path / "a").string(), (t.path / "x" / "a").string(), (t.path / "sat").string()});
  REQUIRE(runs.size() == 3);
  CHECK(runs[0].name == "a");
  CHECK(runs[1].name == "a-2");
  CHECK(runs[2].name == "sat");
  CHECK(runs[2].saturation);
  CHECK_THROWS_WITH(served_runs({(t.path / "none").string()}),
                    Catch::Contains("no such run folder"));
  fs::create_directories(t.path / "empty");
  CHECK_THROWS_WITH(served_runs({(t.path / "empty").string()}),
                    Catch::Contains("not a run folder"));
}

TEST_CASE("serve: only regular files inside the run folder, links resolved, are let out") {
  TempDir t("serve_files");
  const ServedRun r = run_in(t, "run");
  write(t.path / "secret.txt", "no");
  fs::create_symlink(t.path / "secret.txt", t.path / "run" / "out.txt");
  fs::create_symlink(t.path, t.path / "run" / "up");
  fs::create_symlink(r.dir / "sub" / "chart.svg", r.dir / "inside.svg");
  CHECK(file_inside(r, "config.toml") == r.dir / "config.toml");
  CHECK(file_inside(r, "sub/chart.svg") == r.dir / "sub" / "chart.svg");
  CHECK(file_inside(r, "inside.svg") == r.dir / "sub" / "chart.svg");  // a link that stays
  for (const char* bad : {"", "../secret.txt", "sub/../../secret.txt", "./config.toml",
                          "/etc/passwd", "out.txt", "up/secret.txt", "sub", "missing.svg"}) {
    INFO(bad);
    CHECK_FALSE(file_inside(r, bad).has_value());
  }
}

TEST_CASE("serve: metrics.jsonl is read in complete lines from an offset") {
  TempDir t("serve_metrics");
  const ServedRun r = run_in(t, "run");
  CHECK(read_metrics(r, 0, -1)["records"].empty());  // no file yet
  const fs::path m = r.dir / "metrics.jsonl";
  write(m, "{\"step\":1,\"loss\":3}\n{\"step\":2,\"loss\":2}\n{\"step\":3,\"lo");
  nlohmann::json j = read_metrics(r, 0, -1);
  REQUIRE(j["records"].size() == 2);
  CHECK(j["records"][1]["step"] == 2);
  const int64_t next = j["next"];
  CHECK(next == 40);  // the start of the unfinished line
  CHECK(read_metrics(r, next, -1)["records"].empty());
  write(m, "ss\":1}\nnot json\n{\"step\":4,\"loss\":0.5}\n", std::ios::app);
  j = read_metrics(r, next, -1);
  REQUIRE(j["records"].size() == 2);  // the line that is not JSON is skipped
  CHECK(j["records"][0]["step"] == 3);
  CHECK(j["next"] == static_cast<int64_t>(fs::file_size(m)));
  CHECK(read_metrics(r, 0, 2)["records"].size() == 2);  // since step 2: steps 3 and 4
  // A file shorter than the offset was replaced: read again from the start, and say so.
  j = read_metrics(r, 1 << 20, -1);
  CHECK(j["reset"] == true);
  CHECK(j["records"].size() == 4);
  // A byte bound per answer: the lines that fit, then the rest from `next`.
  j = read_metrics(r, 0, -1, 25);
  CHECK(j["records"].size() == 1);
  CHECK(read_metrics(r, j["next"].get<int64_t>(), -1)["records"].size() == 3);
}
