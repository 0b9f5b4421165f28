// What a benchmarked process computes on: the BLAS library mapped into it, how that library
// threads, OPENBLAS_CORETYPE and the thread counts; and the checks that make `qkv bench
// --compare` refuse (or, with --allow-unfair, flag) a comparison that is not worth printing.
//
// The BLAS is read from the process's own memory map (/proc/self/maps): the file that holds
// the sgemm the process calls, its path resolved through symlinks (Debian's libblas.so.3 is an
// alternatives symlink), classified by where Debian installs each implementation.
// apps/bench_reference.py reports the same fields for the PyTorch process, so one classifier
// (blas_family) and one set of checks (comparison_problems) serve both sides.
#pragma once
#include <cstdint>
#include <istream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace qkv::bench {

struct RuntimeInfo {
  std::string framework;                // "qkv" or "torch"
  std::string sgemm_file;               // the mapped file holding the sgemm called ("" unknown)
  std::vector<std::string> blas_files;  // every mapped BLAS/LAPACK-looking file, map order
  std::string blas;                     // blas_family(sgemm_file)
  std::string blas_threading;           // "sequential", "pthreads", "openmp" or "unknown"
  std::string openblas_config;          // openblas_get_config() ("" when not OpenBLAS)
  std::string openblas_corename;        // openblas_get_corename()
  int blas_threads = -1;                // openblas_get_num_threads() (-1: not OpenBLAS)
  std::string coretype_env;             // OPENBLAS_CORETYPE ("" unset)
  int threads = 0;                      // compute threads the framework runs (qkv's, torch's)
  int interop_threads = 0;              // torch.get_num_interop_threads() (0 for qkv)
  int omp_max_threads = 0;              // omp_get_max_threads()
  int cores = 0;                        // online CPUs this process may run on
  std::string onednn;                   // oneDNN's version and ISA ("2.6.3, avx512_core_bf16")
  std::string omp_wait;                 // how idle OpenMP threads wait: "spin", "passive", ...
};

// The distinct file paths of a /proc/<pid>/maps listing, in order of first appearance.
std::vector<std::string> mapped_files(std::istream& maps);
// The file whose mapping contains addr ("" when none does).
std::string file_containing(std::istream& maps, std::uintptr_t addr);
// The mapped files whose names say BLAS or LAPACK (libblas, libopenblas, libmkl, libblis,
// libatlas, liblapack, libcblas).
std::vector<std::string> blas_like(const std::vector<std::string>& files);
// "openblas", "reference" (netlib, Debian's libblas3: .../blas/libblas.so.3*), "mkl", "blis",
// "atlas" or "unknown", from a resolved path.
std::string blas_family(const std::string& path);
// openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP; anything else "unknown".
std::string openblas_threading(int parallel);
// path through symlinks (realpath); unchanged when it does not exist here.
std::string resolve_path(const std::string& path);

// This process (qkv): the file holding cblas_sgemm, OpenBLAS's own report, the thread counts.
RuntimeInfo this_process(int threads);

// Why a side's numbers are not worth comparing: the reference BLAS, a pthread OpenBLAS inside
// more than one OpenMP thread, more threads than cores. Empty: fine.
std::vector<std::string> comparison_problems(const RuntimeInfo& r);
// What a reader of the numbers should know though it is fair to both sides: OPENBLAS_CORETYPE
// forcing OpenBLAS's kernels (on an AVX-512 machine, Haswell's halve sgemm's speed), or the
// two sides running different OpenBLAS kernels. torch may be null (qkv alone).
std::vector<std::string> runtime_notes(const RuntimeInfo& qkv, const RuntimeInfo* torch);
// One header line: "qkv: OpenBLAS 0.3.21 (OpenMP build, Haswell kernels, ...) ...".
std::string describe(const RuntimeInfo& r);

nlohmann::json to_json(const RuntimeInfo& r);
RuntimeInfo runtime_from_json(const nlohmann::json& j);  // fills blas from sgemm_file

}  // namespace qkv::bench
