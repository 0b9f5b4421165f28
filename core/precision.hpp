// The precision of the linear layers' products: fp32 (the default, OpenBLAS, bit-for-bit as
// always) or bf16 (mixed precision, as torch.autocast("cpu", dtype=torch.bfloat16)).
//
// In bf16, linear_forward, linear_input_grad and linear_weight_grad (core/fused.hpp) round
// both operands to bfloat16 (core/bf16.hpp) and run oneDNN's bf16 matmul with float32
// accumulation and a float32 result, and fused attention on float32 inputs runs its tile
// products in bf16 with float32 statistics (core/attention_bf16.hpp). Everything else stays
// float32: master weights, gradients, optimizer state, LayerNorm, the loss and every reduction.
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
// forward and backward (the optimizer's update follows its end); a command opens one around
// all its work (validation, decoding), in which the weights stay fixed. An activation (any
// other operand) is rounded at the first product that reads it in a scope and the copy reused
// by later products of the scope (the backward's included) until its storage is written in
// place (Storage::version), so each is rounded once per step. Scopes nest; the innermost
// precision applies.
#pragma once
#include <string>

namespace qkv {

enum class Precision { fp32, bf16, auto_ };

// "fp32", "bf16", "auto"
const char* precision_name(Precision p);
// The inverse; throws qkv::Error naming the accepted values.
Precision parse_precision(const std::string& name);

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

}  // namespace qkv
