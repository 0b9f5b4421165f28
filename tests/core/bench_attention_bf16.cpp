// bench_attention_bf16: fused attention forward + backward in bf16 (core/attention_bf16.hpp)
// against the float32 kernel on the same inputs, in one process, rounds alternating, so that a
// busy machine slows both alike: the median over rounds of each round's bf16 / fp32 time ratio,
// at the attention shapes of `qkv bench`'s models. With versus = onednn, the two bf16 backends
// instead (core/attention_backend.hpp): oneDNN's matmuls against qkv's tiles, oneDNN's blocks
// optionally given (query rows and keys forward, then backward).
// Usage: bench_attention_bf16 [threads=2] [rounds=7] [min_seconds_per_timing=0.2] [filter]
//                             [versus=fp32 | onednn[:FQ,FK,BQ,BK]]
// (filter: only the shapes whose description contains it; "" for all)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_timing.hpp"
#include "core/attention_backend.hpp"
#include "core/attention_onednn.hpp"
#include "core/fused.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "core/random.hpp"

using namespace qkv;

namespace {

struct Case {
  const char* what;
  int64_t B, H, n, m, d;
  bool causal;
};

// (n, m) causal mask, query i at key position i + m - n
Tensor causal(int64_t n, int64_t m) {
  Tensor t = zeros({n, m}, DType::b8);
  uint8_t* p = static_cast<uint8_t*>(t.storage()->data());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= std::min(m - 1, i + m - n); ++j) p[i * m + j] = 1;
  return t;
}

// One forward + backward in precision p, on backend b in bf16.
void step(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& mask,
          Precision p, AttentionBackend b) {
  AttentionBackendScope backend(b);
  PrecisionScope scope(p);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const AttentionResult r = attention_forward(q, k, v, mask, scale);
  (void)attention_backward(q, k, v, mask, scale, r.out, r.lse, g, r.precision);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const double min_seconds = argc > 3 ? std::atof(argv[3]) : 0.2;
  const std::string filter = argc > 4 ? argv[4] : "";
  const std::string versus = argc > 5 ? argv[5] : "fp32";
  set_num_threads(threads);
  // the two timed variants: (precision, backend) of the denominator and of the numerator
  struct Variant {
    const char* name;
    Precision p;
    AttentionBackend b;
  };
  Variant den{"fp32", Precision::fp32, AttentionBackend::auto_};
  Variant num{"bf16", Precision::bf16, AttentionBackend::auto_};
  if (versus.rfind("onednn", 0) == 0) {
    den = {"tiles", Precision::bf16, AttentionBackend::tiles};
    num = {"onednn", Precision::bf16, AttentionBackend::onednn};
    kernel::OnednnAttentionBlocks& blk = kernel::onednn_attention_blocks();
    if (versus.size() > 7 && std::sscanf(versus.c_str() + 7, "%ld,%ld,%ld,%ld", &blk.fq, &blk.fk,
                                         &blk.bq, &blk.bk) != 4) {
      std::fprintf(stderr, "versus: onednn:FQ,FK,BQ,BK, got '%s'\n", versus.c_str());
      return 2;
    }
    std::printf("oneDNN blocks: forward %ld x %ld, backward %ld x %ld; %s\n", blk.fq, blk.fk,
                blk.bq, blk.bk, attention_backend_description(AttentionBackend::onednn).c_str());
  } else if (versus != "fp32") {
    std::fprintf(stderr, "versus: fp32 or onednn[:FQ,FK,BQ,BK], got '%s'\n", versus.c_str());
    return 2;
  }
  const std::string why = bf16_unsupported_reason();
  if (!why.empty()) {
    std::printf("bf16 cannot run here: %s\n", why.c_str());
    return 0;
  }
  const Case cases[] = {
      {"gpt-char (12 x 4 heads, 64 tokens, causal)", 12, 4, 64, 64, 32, true},
      {"multi30k encoder (128 x 4, 17 tokens)", 128, 4, 17, 17, 64, false},
      {"multi30k decoder self (128 x 4, 21, causal)", 128, 4, 21, 21, 64, true},
      {"annotated (80 x 8, 10 tokens)", 80, 8, 10, 10, 64, false},
      {"128 tokens (8 x 8 heads)", 8, 8, 128, 128, 64, false},
      {"256 tokens (4 x 8 heads)", 4, 8, 256, 256, 64, false},
      {"512 tokens (2 x 8 heads)", 2, 8, 512, 512, 64, false},
      {"1024 tokens (8 heads)", 1, 8, 1024, 1024, 64, false},
      {"attention-4096 (8 heads, 4096 tokens)", 1, 8, 4096, 4096, 64, false},
      {"4096 tokens causal", 1, 8, 4096, 4096, 64, true},
  };
  std::printf("attention forward + backward, %d threads, %d alternating rounds\n\n", threads,
              rounds);
  std::printf("| shape | %s ms | %s ms | %s / %s (median of rounds) | range |\n", den.name,
              num.name, num.name, den.name);
  std::printf("|---|---:|---:|---:|---|\n");
  for (const Case& c : cases) {
    if (std::string(c.what).find(filter) == std::string::npos) continue;
    Generator gen(1);
    const Tensor q = randn({c.B, c.H, c.n, c.d}, gen), k = randn({c.B, c.H, c.m, c.d}, gen),
                 v = randn({c.B, c.H, c.m, c.d}, gen), g = randn({c.B, c.H, c.n, c.d}, gen);
    const Tensor mask = c.causal ? causal(c.n, c.m) : Tensor();
    std::vector<double> f32, b16, ratio;
    for (int r = 0; r < rounds; ++r) {
      f32.push_back(
          bench_core::median_seconds([&] { step(q, k, v, g, mask, den.p, den.b); }, min_seconds));
      b16.push_back(
          bench_core::median_seconds([&] { step(q, k, v, g, mask, num.p, num.b); }, min_seconds));
      ratio.push_back(b16.back() / f32.back());
    }
    std::printf("| %s | %.3f | %.3f | %.2f | %.2f-%.2f |\n", c.what, 1e3 * median(f32),
                1e3 * median(b16), median(ratio), *std::min_element(ratio.begin(), ratio.end()),
                *std::max_element(ratio.begin(), ratio.end()));
    std::fflush(stdout);
  }
}
