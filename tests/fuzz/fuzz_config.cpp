// libFuzzer target: the config reader. Arbitrary bytes go through parse_config (toml++) and then
// config_from_toml (which validates every key); a qkv::Error is the expected answer to bad
// input, anything else (a crash, a sanitizer report, another exception type) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "config/document.hpp"
#include "core/error.hpp"

namespace qkv::fuzz {
// One input; also replayed by the unit test test_fuzz_replay (tests/fuzz/test_replay.cpp).
int config(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const qkv::config::ConfigDoc doc = qkv::config::parse_config(text, "fuzz.toml");
    const qkv::config::RunConfig cfg = qkv::config::config_from_toml(doc);
    // A valid config must survive its own round trip.
    (void)qkv::config::config_from_toml(
        qkv::config::parse_config(qkv::config::effective_toml(cfg), "effective.toml"));
  } catch (const qkv::Error&) {
  }
  return 0;
}
}  // namespace qkv::fuzz

#ifndef QKV_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return qkv::fuzz::config(data, size);
}
#endif
