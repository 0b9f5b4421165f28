// Replays every committed fuzz input through its target, in the normal build: the seed corpora
// (tests/fuzz/corpus/<target>/) and the inputs that once crashed (tests/fuzz/regressions/
// <target>/, each named after the bug it found). A regression aborts or fails this test.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace qkv::fuzz {
int config(const uint8_t* data, size_t size);
int overrides(const uint8_t* data, size_t size);
int tsv(const uint8_t* data, size_t size);
int vocab(const uint8_t* data, size_t size);
int safetensors(const uint8_t* data, size_t size);
}  // namespace qkv::fuzz

namespace {

namespace fs = std::filesystem;
using Target = int (*)(const uint8_t*, size_t);

// Runs target on every file of corpus/<name> and regressions/<name>; returns how many.
int replay(const std::string& name, Target target) {
  const char* src = std::getenv("QKV_SOURCE_DIR");
  const fs::path root = fs::path(src ? src : ".") / "tests" / "fuzz";
  int n = 0;
  for (const char* kind : {"corpus", "regressions"}) {
    const fs::path dir = root / kind / name;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string bytes = ss.str();
      INFO(e.path().string());
      CHECK(target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
      ++n;
    }
  }
  return n;
}

}  // namespace

TEST_CASE("fuzz replay: config reader seeds and regressions", "[unit]") {
  CHECK(replay("config", qkv::fuzz::config) >= 5);
}
TEST_CASE("fuzz replay: command-line override seeds and regressions", "[unit]") {
  CHECK(replay("overrides", qkv::fuzz::overrides) >= 8);
}
TEST_CASE("fuzz replay: TSV reader seeds and regressions", "[unit]") {
  CHECK(replay("tsv", qkv::fuzz::tsv) >= 3);
}
TEST_CASE("fuzz replay: vocabulary reader seeds and regressions", "[unit]") {
  CHECK(replay("vocab", qkv::fuzz::vocab) >= 3);
}
TEST_CASE("fuzz replay: safetensors loader seeds and regressions", "[unit]") {
  CHECK(replay("safetensors", qkv::fuzz::safetensors) >= 4);
}
