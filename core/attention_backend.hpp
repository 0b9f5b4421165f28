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
// ONEDNN_MAX_CPU_ISA), where its products run at several times the tiles' rate, and the tiles
// elsewhere (on AVX512_BF16 without AMX they measure level with oneDNN or faster:
// docs/performance.md).
#pragma once
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

// What auto means here: onednn when oneDNN's effective ISA has AMX, else tiles.
AttentionBackend auto_attention_backend();

// The backend bf16 attention uses on this thread, never auto: the innermost
// AttentionBackendScope's, else QKV_ATTENTION_BACKEND's, auto resolved.
AttentionBackend attention_backend();

// "onednn (brg:avx512_core_amx)" / "tiles (AVX512_BF16)": the backend and the kernel under it,
// for the bench and the logs.
std::string attention_backend_description();

// Sets the calling thread's backend for its lifetime (tests, the bench); auto resolves as above.
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
