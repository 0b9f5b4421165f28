// The roofs `qkv bench` measures MFU against, on the calling thread count: for fp32 a 1024^3
// sgemm, for bf16 a 2048^3 product on the bf16 GEMM qkv's products run (oneDNN's).
#pragma once

namespace qkv::bench {

double sgemm_peak_gflops();
double bf16_gemm_peak_gflops();

}  // namespace qkv::bench
