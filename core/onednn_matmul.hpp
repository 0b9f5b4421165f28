// Internal to core/: oneDNN bf16 matmul primitives for the products of one thread's work item
// (the attention kernel of core/attention_onednn.cpp), where core/onednn.hpp's products plan
// for the whole pool. Each shape's primitive is planned once for one thread and cached by the
// calling thread (at most kMaxBf16Plans, the least recently used dropped), so that the same call
// gives the same bits whatever the thread count, and a steady step creates none. oneDNN picks its
// kernel for the CPU and ONEDNN_MAX_CPU_ISA: AMX tiles, AVX512_BF16 dot products or AVX-512
// conversions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "bf16.hpp"

namespace qkv::kernel {

// A stored bfloat16 matrix read as op(M) (rows, cols): M itself, row-major with row stride ld,
// or (trans) the transpose of a row-major (cols, rows) M with row stride ld.
struct Bf16Operand {
  const bf16_t* p;
  int64_t ld;
  bool trans = false;
};

// c (n, m) = a (n, k) b (k, m), or c += a b when accumulate (oneDNN's sum post-op: the product
// summed in float32, then added to c); float32 accumulation, c float32 with row stride ldc. On
// the calling thread alone; callable inside a parallel region. Throws qkv::Error when oneDNN
// has no bf16 matmul here (ONEDNN_MAX_CPU_ISA below AVX512_CORE).
void matmul_bf16_one_thread(int64_t n, int64_t m, int64_t k, Bf16Operand a, Bf16Operand b, float* c,
                            int64_t ldc, bool accumulate);

// Plans a thread keeps (each takes 0.2-0.5 ms to make).
inline constexpr size_t kMaxBf16Plans = 256;
// How many this thread holds now (tests).
size_t matmul_bf16_plans_on_this_thread();

// oneDNN's name for the kernel it runs a product of this kind with ("brg:avx512_core_bf16",
// "brg:avx512_core_amx", "gemm:jit"), or why there is none.
std::string matmul_bf16_kernel_name(int64_t n, int64_t m, int64_t k);

}  // namespace qkv::kernel
