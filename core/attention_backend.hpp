// Which kernel runs fused attention's tile products in bf16 (core/precision.hpp): qkv's own
// AVX512_BF16 tiles (core/attention_bf16.hpp) or oneDNN's bf16 matmul primitives
// (core/attention_onednn.hpp), which run on AMX tiles where the CPU has them. Both keep the same
// algorithm (online softmax, never the n x m matrix, the backward recomputing the weights) and
// the same float32 statistics; they differ in the order of the products' sums, so in their last
// bits. float32 and float64 attention are not affected.
//
// The choice: the environment variable QKV_ATTENTION_BACKEND ("auto", the default, "tiles" or
// "onednn"), read once per process, unless an AttentionBackendScope on the calling thread says
// otherwise. auto picks oneDNN where its kernels use AMX (dnnl::get_effective_cpu_isa(), after
// ONEDNN_MAX_CPU_ISA), where its products run at several times the tiles' rate, and elsewhere
// by the call's shape: oneDNN when both the queries and the keys number at least
// kOnednnMinTokens, whose products amortise a oneDNN call, the tiles for shorter sequences and
// for decoding's one query (on AVX512_BF16 without AMX, docs/performance.md: oneDNN took
// 0.75-0.9 of the tiles' time from 128 tokens up, 1.2-1.5 times it at 10-21 tokens).
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "core/names.hpp"

namespace qkv {

enum class AttentionBackend { auto_, tiles, onednn };
inline constexpr EnumName<AttentionBackend> kAttentionBackendNames[] = {
    {"auto", AttentionBackend::auto_},
    {"tiles", AttentionBackend::tiles},
    {"onednn", AttentionBackend::onednn}};
constexpr std::span<const EnumName<AttentionBackend>> names_of(AttentionBackend) {
  return kAttentionBackendNames;
}

// QKV_ATTENTION_BACKEND's value (auto when unset or empty); qkv::Error
// "QKV_ATTENTION_BACKEND: must be auto, tiles or onednn, got 'x'" with the nearest name.
AttentionBackend attention_backend_from_env();

// Queries and keys from which auto picks oneDNN on a CPU without AMX.
inline constexpr int64_t kOnednnMinTokens = 128;

// The setting on this thread: the innermost AttentionBackendScope's, else QKV_ATTENTION_BACKEND's.
AttentionBackend attention_backend();

// The backend of a bf16 attention call with n queries and m keys, never auto: the setting, auto
// resolved as above.
AttentionBackend attention_backend_for(int64_t n, int64_t m);

// "onednn (brg:avx512_core_amx)" / "tiles (AVX512_BF16)": backend b (not auto) and the kernel
// under it, for the bench and the logs.
std::string attention_backend_description(AttentionBackend b);

// Sets the calling thread's backend for its lifetime (tests, the bench).
class AttentionBackendScope {
 public:
  explicit AttentionBackendScope(AttentionBackend b);
  ~AttentionBackendScope();
  AttentionBackendScope(const AttentionBackendScope&) = delete;
  AttentionBackendScope& operator=(const AttentionBackendScope&) = delete;

 private:
  int saved_;
};

}  // namespace qkv
