// The precision of the linear layers' products: fp32 (the default, OpenBLAS, bit-for-bit as
// always) or bf16 (mixed precision, as torch.autocast("cpu", dtype=torch.bfloat16)).
//
// In bf16, linear_forward, linear_input_grad and linear_weight_grad (core/fused.hpp) round
// both operands to bfloat16 (core/bf16.hpp) and run oneDNN's bf16 matmul with float32
// accumulation and a float32 result, and fused attention on float32 inputs runs its tile
// products in bf16 with float32 statistics (core/attention_bf16.hpp); an optimizer step taken
// in a bf16 scope runs Muon's Newton-Schulz iterations in bf16 (optim/muon.hpp, on
// bf16_gemm_this_thread below). Everything else stays float32: master weights, gradients,
// optimizer state, LayerNorm, the loss and every reduction.
//
// How precision reaches the products: a PrecisionScope on the calling thread, like autocast.
//
//   {
//     PrecisionScope bf16(Precision::bf16);  // throws if this CPU / oneDNN cannot run bf16
//     loss = model.forward(batch); loss.backward();
//   }                                         // then the optimizer updates the f32 weights
//
// A weight (linear_forward's and linear_input_grad's w) is rounded at its first use after a
// scope begins or ends, and the copy reused by every product until the next such boundary, so
// weights must not change except at a boundary. The trainer opens a scope per step around
// forward and backward, and another around the optimizer's update, which reads no copy; a
// command opens one around all its work (validation, decoding), in which the weights stay
// fixed. (A scope that used no weight copy leaves the copies' buffers for the next.) An
// activation (any other operand) is rounded at the first product that reads it in a scope and
// the copy reused by later products of the scope (the backward's included) until its storage
// is written in place (Storage::version), so each is rounded once per step. Scopes nest; the
// innermost precision applies.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "core/bf16.hpp"
#include "core/names.hpp"

namespace qkv {

// The config's top-level precision and --precision: "fp32", "bf16" or "auto" (bf16 where this
// CPU runs it, else fp32; resolve_precision). One names table (core/names.hpp).
enum class Precision { fp32, bf16, auto_ };
inline constexpr EnumName<Precision> kPrecisionNames[] = {
    {"fp32", Precision::fp32}, {"bf16", Precision::bf16}, {"auto", Precision::auto_}};
constexpr std::span<const EnumName<Precision>> names_of(Precision) { return kPrecisionNames; }

// name_of(p) as a C string: "fp32", "bf16", "auto"
const char* precision_name(Precision p);
// parse_name<Precision>(name, key): qkv::Error "KEY: must be fp32, bf16 or auto, got 'x'" with
// the nearest name.
Precision parse_precision(const std::string& name, const std::string& key = "precision");

// Empty when bf16 products can run here; otherwise why not, naming the missing CPU feature
// (AVX512_BF16) or oneDNN's ISA cap (ONEDNN_MAX_CPU_ISA).
std::string bf16_unsupported_reason();
// fp32 -> fp32; bf16 -> bf16, or qkv::Error("<what>: bf16 ... <reason>") when unsupported;
// auto -> bf16 where supported, else fp32.
Precision resolve_precision(Precision p, const std::string& what = "precision");

// The precision of this thread's products: the innermost PrecisionScope's, else fp32.
Precision current_precision();

class PrecisionScope {
 public:
  // p: fp32 or bf16 (resolve auto first); bf16 is checked with resolve_precision.
  explicit PrecisionScope(Precision p);
  ~PrecisionScope();
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision saved_;
};

// c (n, m) = op(a) (n, k) op(b) (k, m) on oneDNN's bf16 matmul, as a bf16 scope's linear
// layers run it, for code that rounds its own operands (optim/muon.cpp's Newton-Schulz):
// bfloat16 operands (row-major, row strides lda, ldb; op transposes when ta / tb), float32
// accumulation and result (row stride ldc). On the calling thread alone, its bits independent
// of the thread count; callable inside a parallel region, where each thread runs products of
// its own. Needs bf16 support (bf16_unsupported_reason() empty, as a bf16 PrecisionScope has
// checked).
void bf16_gemm_this_thread(bool ta, bool tb, int64_t n, int64_t m, int64_t k, const bf16_t* a,
                           int64_t lda, const bf16_t* b, int64_t ldb, float* c, int64_t ldc);

}  // namespace qkv
