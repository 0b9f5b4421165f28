// What `qkv bench` reports each side ran on (bench/bench_runtime.hpp): memory maps parsed from
// fixture files (tests/bench/fixtures/maps-*.txt, trimmed from real /proc/<pid>/maps), the BLAS
// classified from resolved paths, and the checks that refuse an unfair comparison.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "bench/bench_runtime.hpp"
#include "support/common.hpp"

using namespace qkv::bench;

namespace {

std::string fixture(const std::string& name) {
  const char* src = std::getenv("QKV_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/bench/fixtures/" + name;
}

// The BLAS a process runs on, as this_process and bench_reference.py determine it: the file
// holding the sgemm at addr, then its family.
RuntimeInfo from_maps(const std::string& name, std::uintptr_t sgemm_addr) {
  RuntimeInfo r;
  std::ifstream a(fixture(name));
  REQUIRE(a.good());
  r.blas_files = blas_like(mapped_files(a));
  std::ifstream b(fixture(name));
  r.sgemm_file = file_containing(b, sgemm_addr);
  r.blas = blas_family(r.sgemm_file);
  return r;
}

}  // namespace

TEST_CASE("bench runtime: mapped files are distinct, in order, without pseudo maps") {
  std::ifstream in(fixture("maps-pthread-openblas.txt"));
  const std::vector<std::string> files = mapped_files(in);
  REQUIRE(files.size() == 5);
  CHECK(files[0] == "/work/build/apps/qkv");
  CHECK(files[1] == "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so");
  CHECK(files[4] == "/dev/shm/mpi segment");  // spaces kept, " (deleted)" dropped
  CHECK(
      blas_like(files) ==
      std::vector<std::string>{"/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so",
                               "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"});
}

TEST_CASE("bench runtime: PyTorch on the reference BLAS is found and refused") {
  // sgemm_ inside the r-xp mapping of .../blas/libblas.so.3.11.0, though OpenBLAS is mapped too
  // (through liblapack.so.3): the file holding sgemm decides, not what else is loaded.
  RuntimeInfo r = from_maps("maps-torch-reference-blas.txt", 0x7f4fda100000);
  CHECK(r.sgemm_file == "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0");
  CHECK(r.blas == "reference");
  CHECK(r.blas_files.size() == 3);
  r.framework = "torch";
  r.threads = r.omp_max_threads = 2;
  r.cores = 2;
  const std::vector<std::string> p = comparison_problems(r);
  REQUIRE(p.size() == 1);
  CHECK(p[0].find("torch runs on the reference BLAS") != std::string::npos);
  CHECK(p[0].find("libblas.so.3.11.0") != std::string::npos);

  // The same process, its sgemm in OpenBLAS's libopenblasp: fine.
  RuntimeInfo o = from_maps("maps-torch-reference-blas.txt", 0x7f4fc2640000);
  CHECK(o.blas == "openblas");
  o.blas_threading = "openmp";
  o.threads = o.omp_max_threads = o.cores = 2;
  o.blas_threads = 2;
  CHECK(comparison_problems(o).empty());
}

TEST_CASE("bench runtime: a pthread OpenBLAS inside OpenMP threads is refused") {
  RuntimeInfo r = from_maps("maps-pthread-openblas.txt", 0x7f12a3030000);
  CHECK(r.sgemm_file == "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3");
  CHECK(r.blas == "openblas");
  r.framework = "qkv";
  r.blas_threading = openblas_threading(1);
  CHECK(r.blas_threading == "pthreads");
  r.blas_threads = 2;
  r.threads = r.omp_max_threads = 2;
  r.cores = 2;
  std::vector<std::string> p = comparison_problems(r);
  REQUIRE(p.size() == 1);
  CHECK(p[0].find("pthread OpenBLAS (2 threads of its own) inside 2 OpenMP threads: up to 4") !=
        std::string::npos);
  // One OpenMP thread, or OPENBLAS_NUM_THREADS=1: no nesting, no problem.
  r.threads = r.omp_max_threads = 1;
  CHECK(comparison_problems(r).empty());
  r.threads = r.omp_max_threads = 2;
  r.blas_threads = 1;
  CHECK(comparison_problems(r).empty());
}

TEST_CASE("bench runtime: more threads than cores is refused") {
  RuntimeInfo r = from_maps("maps-mkl.txt", 0x7f3301000100);
  CHECK(r.blas == "mkl");
  r.framework = "torch";
  r.threads = 4;
  r.cores = 2;
  std::vector<std::string> p = comparison_problems(r);
  REQUIRE(p.size() == 1);
  CHECK(p[0] == "torch runs 4 threads on 2 cores (oversubscribed)");
  r.threads = 2;
  r.omp_max_threads = 3;  // an OpenMP pool larger than the framework's own count counts too
  CHECK(comparison_problems(r).size() == 1);
}

TEST_CASE("bench runtime: BLAS families by resolved path") {
  CHECK(blas_family("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0") == "reference");
  CHECK(blas_family("/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3") == "openblas");
  CHECK(blas_family("/usr/lib/x86_64-linux-gnu/openblas-serial/libblas.so.3") == "openblas");
  CHECK(blas_family("/usr/lib/x86_64-linux-gnu/libopenblas.so.0") == "openblas");
  CHECK(blas_family("/usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3") == "blis");
  CHECK(blas_family("/usr/lib/x86_64-linux-gnu/atlas/libblas.so.3") == "atlas");
  CHECK(blas_family("/opt/intel/mkl/lib/libmkl_rt.so.2") == "mkl");
  CHECK(blas_family("/usr/lib/x86_64-linux-gnu/libblas.so.3") == "unknown");  // unresolved
  CHECK(blas_family("") == "unknown");
  CHECK(openblas_threading(0) == "sequential");
  CHECK(openblas_threading(2) == "openmp");
  CHECK(openblas_threading(7) == "unknown");
}

TEST_CASE("bench runtime: the libblas.so.3 alternatives symlink resolves to its target") {
  // Debian: /usr/lib/<triplet>/libblas.so.3 -> /etc/alternatives/... -> the chosen BLAS.
  qkv::testing::TempDir dir("bench_runtime");
  namespace fs = std::filesystem;
  fs::create_directories(dir.path / "blas");
  std::ofstream(dir.path / "blas" / "libblas.so.3.11.0") << "not a library";
  fs::create_directories(dir.path / "alternatives");
  fs::create_symlink(dir.path / "blas" / "libblas.so.3.11.0",
                     dir.path / "alternatives" / "libblas.so.3-x86_64-linux-gnu");
  fs::create_symlink(dir.path / "alternatives" / "libblas.so.3-x86_64-linux-gnu",
                     dir.path / "libblas.so.3");
  const std::string resolved = resolve_path((dir.path / "libblas.so.3").string());
  CHECK(resolved == fs::canonical(dir.path / "blas" / "libblas.so.3.11.0").string());
  CHECK(blas_family(resolved) == "reference");
  CHECK(resolve_path("/no/such/libblas.so.3") == "/no/such/libblas.so.3");
}

TEST_CASE("bench runtime: this process reports the OpenBLAS it links") {
  const RuntimeInfo r = this_process(1);
  INFO(describe(r));
  CHECK(r.framework == "qkv");
  CHECK(r.blas == "openblas");  // qkv links OpenBLAS (CMakeLists.txt)
  CHECK(r.sgemm_file.find("openblas") != std::string::npos);
  CHECK(r.blas_threading == "openmp");  // the build core/parallel.hpp's policy needs
  CHECK_FALSE(r.openblas_corename.empty());
  CHECK(r.cores >= 1);
  // The JSON round trip classifies again from sgemm_file, as for PyTorch's report.
  const RuntimeInfo back = runtime_from_json(to_json(r));
  CHECK(back.blas == r.blas);
  CHECK(back.blas_threading == r.blas_threading);
  CHECK(back.threads == r.threads);
}

TEST_CASE("bench runtime: notes on OPENBLAS_CORETYPE and differing kernels") {
  RuntimeInfo q, t;
  q.framework = "qkv";
  t.framework = "torch";
  q.blas = t.blas = "openblas";
  q.openblas_corename = t.openblas_corename = "Cooperlake";
  CHECK(runtime_notes(q, &t).empty());
  CHECK(runtime_notes(q, nullptr).empty());
  q.coretype_env = t.coretype_env = "Haswell";
  q.openblas_corename = t.openblas_corename = "Haswell";
  std::vector<std::string> n = runtime_notes(q, &t);
  REQUIRE(n.size() == 1);
  CHECK(n[0].find("OPENBLAS_CORETYPE=Haswell makes both sides run OpenBLAS's Haswell kernels") ==
        0);
  CHECK(runtime_notes(q, nullptr)[0].find("makes qkv run") != std::string::npos);
  t.coretype_env.clear();
  t.openblas_corename = "Cooperlake";
  n = runtime_notes(q, &t);
  REQUIRE(n.size() == 2);
  CHECK(n[0].find("makes qkv run") != std::string::npos);
  CHECK(n[1] == "qkv runs OpenBLAS's Haswell kernels, torch its Cooperlake kernels");
}
