// libFuzzer target: the vocabulary reader (data/vocab.hpp Vocab::parse, which Vocab::load
// uses). A vocabulary that parses must save and parse back to itself.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "data/vocab.hpp"

namespace qkv::fuzz {
// One input; also replayed by the unit test test_fuzz_replay (tests/fuzz/test_replay.cpp).
int vocab(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const qkv::data::Vocab v = qkv::data::Vocab::parse(in, "fuzz_vocab.txt");
    std::ostringstream out;
    v.write(out);
    std::istringstream again(out.str());
    if (!(qkv::data::Vocab::parse(again, "again.txt") == v)) __builtin_trap();
  } catch (const qkv::Error&) {
  }
  return 0;
}
}  // namespace qkv::fuzz

#ifndef QKV_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return qkv::fuzz::vocab(data, size);
}
#endif
