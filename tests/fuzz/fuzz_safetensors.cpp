// libFuzzer target: the safetensors loader (nn/safetensors.hpp parse_safetensors). Every
// tensor it returns must be readable in full (ASan catches a lie about sizes).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "nn/safetensors.hpp"

namespace qkv::fuzz {
// One input; also replayed by the unit test test_fuzz_replay (tests/fuzz/test_replay.cpp).
int safetensors(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const qkv::nn::SafetensorsFile f = qkv::nn::parse_safetensors(bytes, "fuzz.safetensors");
    volatile unsigned char sink = 0;
    for (const auto& [name, t] : f.tensors) {
      const qkv::Tensor c = t.contiguous();
      const auto* p = static_cast<const unsigned char*>(c.raw_data());
      for (int64_t i = 0; i < c.numel() * static_cast<int64_t>(qkv::dtype_size(c.dtype())); ++i)
        sink = sink ^ p[i];
    }
    (void)sink;
  } catch (const qkv::Error&) {
  }
  return 0;
}
}  // namespace qkv::fuzz

#ifndef QKV_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return qkv::fuzz::safetensors(data, size);
}
#endif
