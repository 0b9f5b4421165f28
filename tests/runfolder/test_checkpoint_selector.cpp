// --checkpoint parsed once (runfolder/checkpoint_selector.hpp): every form reads back as written, a
// bad one is one error naming --checkpoint and the nearest name, and resolve_checkpoint takes
// the parsed selector.
#include <catch2/catch.hpp>
#include <filesystem>

#include "run/run.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::run;

TEST_CASE("checkpoint selector: each form parses and prints back as written", "[run]") {
  const std::pair<const char*, CheckpointKind> forms[] = {
      {"best", CheckpointKind::best},
      {"latest", CheckpointKind::latest},
      {"average", CheckpointKind::average},
      {"step-00000100", CheckpointKind::step},
      {"runs/copy/checkpoints/average", CheckpointKind::path},
      {"./step-1", CheckpointKind::path}};
  for (const auto& [text, kind] : forms) {
    INFO(text);
    const CheckpointSelector s = parse_checkpoint_selector(text);
    CHECK(s.kind == kind);
    CHECK(s.text() == text);
    CHECK(parse_checkpoint_selector(s.text()) == s);
  }
  CHECK(parse_checkpoint_selector("best").value.empty());
  CHECK(names_list<CheckpointKind>() == "best, latest, average, step-N or path");
}

TEST_CASE("checkpoint selector: a bad one names --checkpoint and the nearest name", "[run]") {
  CHECK_THROWS_WITH(parse_checkpoint_selector("bets"),
                    Catch::StartsWith("--checkpoint: must be best, latest, average, step-N or "
                                      "path (") &&
                        Catch::EndsWith(", got 'bets'; did you mean 'best'?"));
  CHECK_THROWS_WITH(parse_checkpoint_selector("lates"), Catch::EndsWith("did you mean 'latest'?"));
  // the patterns' own names and malformed steps are refused, with nothing offered
  for (const char* bad : {"step-N", "path", "step-", "step-12a", ""}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_checkpoint_selector(bad), Catch::StartsWith("--checkpoint: must be") &&
                                                          !Catch::Contains("did you mean"));
  }
}

TEST_CASE("checkpoint selector: resolve_checkpoint takes the parsed selector", "[run]") {
  qkv::testing::TempDir t("selector");
  const std::string run = t.file("run");
  std::filesystem::create_directories(run + "/checkpoints");
  CHECK_THROWS_WITH(resolve_checkpoint(run, parse_checkpoint_selector("step-00000007")),
                    Catch::Contains("has no checkpoint step-00000007"));
  CHECK_THROWS_WITH(resolve_checkpoint(run, CheckpointSelector{}),
                    Catch::Contains("no checkpoint in this run folder"));
  // the text overload is the same parse
  CHECK_THROWS_WITH(resolve_checkpoint(run, "bets"), Catch::Contains("did you mean 'best'?"));
}
