// The bf16 attention backend (core/attention_backend.hpp).
#include "core/attention_backend.hpp"

#include <cstdlib>
#include <oneapi/dnnl/dnnl.hpp>

#include "core/bf16.hpp"
#include "core/onednn_matmul.hpp"

namespace qkv {
namespace {

constexpr int kNoScope = -1;

int& scoped() {
  thread_local int b = kNoScope;
  return b;
}

bool onednn_has_amx() {
#if defined(__x86_64__)
  const auto amx = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_amx);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & amx) == amx;
#else
  return false;
#endif
}

}  // namespace

AttentionBackend attention_backend_from_env() {
  const char* v = std::getenv("QKV_ATTENTION_BACKEND");
  if (!v || !*v) return AttentionBackend::auto_;
  return parse_name<AttentionBackend>(v, "QKV_ATTENTION_BACKEND");
}

AttentionBackend attention_backend() {
  if (scoped() != kNoScope) return static_cast<AttentionBackend>(scoped());
  static const AttentionBackend from_env = attention_backend_from_env();
  return from_env;
}

AttentionBackend attention_backend_for(int64_t n, int64_t m) {
  const AttentionBackend b = attention_backend();
  if (b != AttentionBackend::auto_) return b;
  static const bool amx = onednn_has_amx();
  return amx || (n >= kOnednnMinTokens && m >= kOnednnMinTokens) ? AttentionBackend::onednn
                                                                 : AttentionBackend::tiles;
}

std::string attention_backend_description(AttentionBackend b) {
  if (b == AttentionBackend::onednn)
    return "onednn (" + kernel::matmul_bf16_kernel_name(64, 256, 64) + ")";
  return bf16_simd() ? "tiles (AVX512_BF16)" : "tiles (scalar reference)";
}

AttentionBackendScope::AttentionBackendScope(AttentionBackend b) : saved_(scoped()) {
  scoped() = static_cast<int>(b);
}

AttentionBackendScope::~AttentionBackendScope() { scoped() = saved_; }

}  // namespace qkv
