// Provenance: what produced a run, since its last bits depend on it. Each new run folder gets a
// provenance.json beside config.toml:
//
//   {"qkv": {"version": "0.1.0", "commit": "<40 hex>", "describe": "7369057-dirty"},
//    "compiler": "GNU 12.2.0",
//    "blas": {"library": "openblas", "config": "OpenBLAS 0.3.21 ...", "core": "Cooperlake",
//             "threading": "openmp", "file": "/usr/lib/.../libopenblas.so.0"},
//    "onednn": {"built": true, "version": "2.6.3 ...", "isa": "avx512_core_bf16", "bf16": true},
//    "attention": {"setting": "auto", "short": "tiles (AVX512_BF16)",
//                  "long": "onednn (brg:avx512_core_bf16)"},
//    "cpu": {"model": "Intel(R) Xeon(R) ...", "features": ["avx2", "avx512f", ...]},
//    "cores": 2, "threads": 2,
//    "precision": {"asked": "auto", "ran": "fp32", "why": "this CPU lacks AVX512_BF16 ..."},
//    "kernels": "OpenBLAS Cooperlake"}
//
// "kernels" names the code paths the arithmetic ran on; `qkv eval` and `qkv train --resume`
// compare it with their own and say so in one line when it differs. "precision": the config's
// precision, what the products ran in, and ("why", only when "auto" became fp32) what kept
// bf16 from running on this machine. "attention": the kernel bf16 attention ran on
// (core/attention_backend.hpp) for short and long sequences.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/precision.hpp"

namespace qkv::run {

// This process, running `threads` threads, asked for precision `asked`, running in `ran`.
nlohmann::json provenance(int threads, Precision asked, Precision ran);
// The kernels line of this process (provenance(...)["kernels"]).
std::string kernels_now();
// RUN/provenance.json, or null when the run has none (runs older than provenance).
nlohmann::json read_provenance(const std::string& run_dir);
// "RUN was trained on KERNELS, this process runs KERNELS2: ..." when the run's kernels differ
// from this process's; "" when they match or the run records none. `doing`: "eval", "resume".
std::string kernel_change(const std::string& run_dir, const std::string& doing);

}  // namespace qkv::run
