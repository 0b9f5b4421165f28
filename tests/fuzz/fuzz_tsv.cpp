// libFuzzer target: the TSV corpus reader (data/corpus.hpp parse_tsv), strict and lenient.
// qkv::Error is the expected answer to a malformed line; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "data/corpus.hpp"

namespace qkv::fuzz {
// One input; also replayed by the unit test test_fuzz_replay (tests/fuzz/test_replay.cpp).
int tsv(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const bool lenient : {false, true}) {
    qkv::data::TsvOptions o;
    o.skip_malformed = lenient;
    o.lowercase = size % 2 == 1;  // both casings, chosen by the input so runs are reproducible
    std::istringstream in(text);
    try {
      const qkv::data::TsvCorpus c = qkv::data::parse_tsv(in, "fuzz.tsv", o);
      for (const auto& p : c.pairs)
        if (p.src.empty() || p.tgt.empty())
          __builtin_trap();  // the header promises non-empty sides
    } catch (const qkv::Error&) {
      if (lenient) __builtin_trap();  // skip_malformed never throws on content
    }
  }
  return 0;
}
}  // namespace qkv::fuzz

#ifndef QKV_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return qkv::fuzz::tsv(data, size);
}
#endif
