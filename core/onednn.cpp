#include "onednn.hpp"

#include <omp.h>

#include <algorithm>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "error.hpp"
#include "kernel_util.hpp"
#include "onednn_engine.hpp"
#include "parallel.hpp"

namespace qkv {

dnnl::engine& kernel::onednn_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& kernel::onednn_thread_stream() {
  thread_local dnnl::stream s(onednn_engine());
  return s;
}

std::unique_ptr<kernel::MatmulProduct> kernel::MatmulProduct::make(
    const dnnl::matmul::primitive_desc& pd, bool with_bias) {
  const dnnl::engine& eng = onednn_engine();
  auto p = std::make_unique<MatmulProduct>();
  p->prim = dnnl::matmul(pd);
  p->src = dnnl::memory(pd.src_desc(), eng, DNNL_MEMORY_NONE);
  p->wei = dnnl::memory(pd.weights_desc(), eng, DNNL_MEMORY_NONE);
  p->dst = dnnl::memory(pd.dst_desc(), eng, DNNL_MEMORY_NONE);
  p->scratch_buf.resize(std::max<size_t>(pd.scratchpad_desc().get_size(), 1));
  p->scratch = dnnl::memory(pd.scratchpad_desc(), eng, p->scratch_buf.data());
  p->args = {{DNNL_ARG_SRC, p->src},
             {DNNL_ARG_WEIGHTS, p->wei},
             {DNNL_ARG_DST, p->dst},
             {DNNL_ARG_SCRATCHPAD, p->scratch}};
  if (with_bias) {
    p->bias = dnnl::memory(pd.bias_desc(), eng, DNNL_MEMORY_NONE);
    p->args[DNNL_ARG_BIAS] = p->bias;
  }
  return p;
}

void kernel::MatmulProduct::run() {
  prim.execute(onednn_thread_stream(), args);
  onednn_thread_stream().wait();
}

namespace {

using MemDims = dnnl::memory::dims;
using DT = dnnl::memory::data_type;

// A stored row-major matrix read as (rows, cols) of op: (rows, cols) itself, or the transpose
// of a (cols, rows) matrix with row stride ld.
dnnl::memory::desc operand_desc(int64_t rows, int64_t cols, bool trans, int64_t ld, DT dt) {
  return trans ? dnnl::memory::desc(MemDims{rows, cols}, dt, MemDims{1, ld})
               : dnnl::memory::desc(MemDims{rows, cols}, dt, MemDims{ld, 1});
}

// One product shape's primitive, with its memory objects (pointed at the operands per call),
// argument map and scratchpad, all made once.
using kernel::MatmulProduct;

using ProductKey =
    std::tuple<int64_t, int64_t, int64_t, bool, bool, int64_t, int64_t, int64_t, bool, int>;

std::unique_ptr<MatmulProduct> make_product(const ProductKey& key) {
  const auto [n, m, k, ta, tb, lda, ldb, ldc, has_bias, threads] = key;
  (void)threads;  // the primitive splits its work for omp_get_max_threads() at creation
  const dnnl::engine& eng = kernel::onednn_engine();
  const auto a_md = operand_desc(n, k, ta, lda, DT::bf16);
  const auto b_md = operand_desc(k, m, tb, ldb, DT::bf16);
  const auto c_md = dnnl::memory::desc(MemDims{n, m}, DT::f32, MemDims{ldc, 1});
  const auto bias_md =
      has_bias ? dnnl::memory::desc(MemDims{1, m}, DT::f32, MemDims{m, 1}) : dnnl::memory::desc();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::desc d(a_md, b_md, bias_md, c_md);
  return MatmulProduct::make(dnnl::matmul::primitive_desc(d, attr, eng), has_bias);
}

MatmulProduct& product_for(const ProductKey& key) {
  thread_local std::map<ProductKey, std::unique_ptr<MatmulProduct>> cache;
  std::unique_ptr<MatmulProduct>& p = cache[key];
  if (!p) p = make_product(key);
  return *p;
}

#if defined(__x86_64__)
const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "unknown";
  }
}
#endif

}  // namespace

std::string onednn_version() {
  const dnnl::version_t* v = dnnl::version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

// dnnl::cpu_isa names x86's instruction sets only. oneDNN built for another architecture
// returns values of its own there, which these names and bits would misread (arm64's reads as
// "avx512_mic_4ops"): name the architecture instead, and its bf16 answer is no.
std::string onednn_isa() {
#if defined(__x86_64__)
  return isa_name(dnnl::get_effective_cpu_isa());
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

bool onednn_isa_has_bf16() {
#if defined(__x86_64__)
  const auto want = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & want) == want;
#else
  return false;
#endif
}

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;  // an x86 extension: other CPUs' bf16 instructions are not what qkv's kernels use
#endif
}

namespace kernel {

namespace {

void run_product(const ProductKey& key, const bf16_t* a, const bf16_t* b, float* c,
                 const float* bias) {
  MatmulProduct& p = product_for(key);
  p.src.set_data_handle(const_cast<bf16_t*>(a));
  p.wei.set_data_handle(const_cast<bf16_t*>(b));
  p.dst.set_data_handle(c);
  if (bias) p.bias.set_data_handle(const_cast<float*>(bias));
  p.run();
}

// The product on the calling thread alone, with a primitive planned for one thread: its bits
// do not depend on how many threads the process has.
void run_one_thread(bool ta, bool tb, int64_t n, int64_t m, int64_t k, const bf16_t* a, int64_t lda,
                    const bf16_t* b, int64_t ldb, float* c, int64_t ldc, const float* bias) {
  const OmpOneThread one;  // a primitive made and run inside plans for one thread
  run_product(ProductKey{n, m, k, ta, tb, lda, ldb, ldc, bias != nullptr, 1}, a, b, c, bias);
}

// Whether oneDNN's own split of a training product beats one band per thread: when k is more
// than twice the result's larger side and the result is large, oneDNN can cut k between the
// threads, which one-thread bands cannot (the output layer's dx, 2688 x 256 over a 6000-word
// vocabulary: 16.4 ms on oneDNN's split, 19.2 ms in bands; every other Multi30k and gpt-char
// product was faster in bands, 2.7-25%, docs/performance.md).
bool onednn_split_pays(int64_t n, int64_t m, int64_t k) {
  return k > 2 * std::max(n, m) && n * m >= 512 * 512;
}

}  // namespace

void gemm_bf16_this_thread(bool ta, bool tb, int64_t n, int64_t m, int64_t k, const bf16_t* a,
                           int64_t lda, const bf16_t* b, int64_t ldb, float* c, int64_t ldc,
                           const float* bias) {
  run_one_thread(ta, tb, n, m, k, a, lda, b, ldb, c, ldc, bias);
}

void gemm_bf16(bool ta, bool tb, int64_t n, int64_t m, int64_t k, const bf16_t* a, int64_t lda,
               const bf16_t* b, int64_t ldb, float* c, int64_t ldc, const float* bias) {
  gemm_bf16(ta, tb, n, m, k, a, lda, b, ldb, c, ldc, bias, GemmEpilogue());
}

void gemm_bf16(bool ta, bool tb, int64_t n, int64_t m, int64_t k, const bf16_t* a, int64_t lda,
               const bf16_t* b, int64_t ldb, float* c, int64_t ldc, const float* bias,
               const GemmEpilogue& epilogue) {
  QKV_CHECK(!in_parallel_region(), "gemm_bf16", "called inside a parallel region (", n, " x ", m,
            ", k ", k, ")");
  // A product run whole: its epilogue after it, on row blocks across the threads.
  auto whole_epilogue = [&] {
    if (epilogue) parallel_for(n, 4 * m, [&](int64_t r0, int64_t r1) { epilogue(r0, r1, 0, m); });
  };
  const bool invariant = thread_invariant_products();
  if (!invariant && (get_num_threads() <= 1 || onednn_split_pays(n, m, k))) {
    const ProductKey key{n, m, k, ta, tb, lda, ldb, ldc, bias != nullptr, get_num_threads()};
    run_product(key, a, b, c, bias);
    return whole_epilogue();
  }
  if (n * m * k < kBandMinWork) {
    run_one_thread(ta, tb, n, m, k, a, lda, b, ldb, c, ldc, bias);
    return whole_epilogue();
  }
  // Each band on one thread with a one-thread plan, as qkv's sgemm bands run: no thread waits
  // for another inside the product (oneDNN's own split left one of two threads idle for 9% of
  // Multi30k's step). Under ThreadInvariantProducts the bands are fixed by the shape, so that
  // the bits do not depend on the thread count (oneDNN may split k between threads otherwise).
  const bool by_rows = n >= m;
  auto band = [&](int64_t lo, int64_t hi) {
    if (by_rows)
      run_one_thread(ta, tb, hi - lo, m, k, a + op_row_offset(ta, lda, lo), lda, b, ldb,
                     c + lo * ldc, ldc, bias);
    else
      run_one_thread(ta, tb, n, hi - lo, k, a, lda, b + op_col_offset(tb, ldb, lo), ldb, c + lo,
                     ldc, bias ? bias + lo : nullptr);
    if (epilogue) by_rows ? epilogue(lo, hi, 0, m) : epilogue(0, n, lo, hi);
  };
  for_product_bands(by_rows ? n : m, band);
}

}  // namespace kernel
}  // namespace qkv
