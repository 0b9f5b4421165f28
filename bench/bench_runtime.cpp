#include "bench/bench_runtime.hpp"

#include <dlfcn.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/onednn.hpp"
#include "core/openmp_wait.hpp"

namespace qkv::bench {
namespace {

// One maps line: "start-end perms offset dev inode [path]"; path may hold spaces.
bool parse_line(const std::string& line, std::uintptr_t& lo, std::uintptr_t& hi,
                std::string& path) {
  std::istringstream in(line);
  std::string range, perms, offset, dev, inode;
  if (!(in >> range >> perms >> offset >> dev >> inode)) return false;
  const size_t dash = range.find('-');
  if (dash == std::string::npos) return false;
  lo = std::strtoull(range.substr(0, dash).c_str(), nullptr, 16);
  hi = std::strtoull(range.substr(dash + 1).c_str(), nullptr, 16);
  std::getline(in, path);
  path.erase(0, path.find_first_not_of(' '));
  const std::string deleted = " (deleted)";
  if (path.size() > deleted.size() && path.ends_with(deleted))
    path.resize(path.size() - deleted.size());
  return true;
}

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}
std::string dir_name(const std::string& path) {
  return std::filesystem::path(path).parent_path().filename().string();
}

}  // namespace

std::vector<std::string> mapped_files(std::istream& maps) {
  std::vector<std::string> files;
  std::string line, path;
  std::uintptr_t lo, hi;
  while (std::getline(maps, line))
    if (parse_line(line, lo, hi, path) && path.starts_with("/") &&
        std::find(files.begin(), files.end(), path) == files.end())
      files.push_back(path);
  return files;
}

std::string file_containing(std::istream& maps, std::uintptr_t addr) {
  std::string line, path;
  std::uintptr_t lo, hi;
  while (std::getline(maps, line))
    if (parse_line(line, lo, hi, path) && lo <= addr && addr < hi) return path;
  return "";
}

std::vector<std::string> blas_like(const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const std::string& f : files) {
    const std::string n = file_name(f);
    for (const char* key :
         {"libblas", "libopenblas", "libmkl", "libblis", "atlas", "liblapack", "libcblas"})
      if (n.find(key) != std::string::npos) {
        out.push_back(f);
        break;
      }
  }
  return out;
}

std::string blas_family(const std::string& path) {
  const std::string n = file_name(path), d = dir_name(path);
  auto has = [](const std::string& s, const char* key) { return s.find(key) != std::string::npos; };
  if (path.empty()) return "unknown";
  if (has(n, "libmkl")) return "mkl";
  if (has(n, "libblis") || d.starts_with("blis")) return "blis";
  if (has(n, "openblas") || d.starts_with("openblas")) return "openblas";
  if (has(n, "atlas") || d == "atlas") return "atlas";
  // Debian's libblas3 (netlib's Fortran reference) installs .../blas/libblas.so.3.x
  if (n.starts_with("libblas.so") && d == "blas") return "reference";
  return "unknown";
}

std::string openblas_threading(int parallel) {
  switch (parallel) {
    case 0:
      return "sequential";
    case 1:
      return "pthreads";
    case 2:
      return "openmp";
    default:
      return "unknown";
  }
}

std::string resolve_path(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::canonical(path, ec);
  return ec ? path : p.string();
}

RuntimeInfo this_process(int threads) {
  RuntimeInfo r;
  r.framework = "qkv";
  {
    std::ifstream maps("/proc/self/maps");
    r.blas_files = blas_like(mapped_files(maps));
  }
  // The sgemm qkv calls (core/matmul.cpp): whichever library the dynamic linker bound it to.
  if (void* f = dlsym(RTLD_DEFAULT, "cblas_sgemm")) {
    std::ifstream maps("/proc/self/maps");
    r.sgemm_file = resolve_path(file_containing(maps, reinterpret_cast<std::uintptr_t>(f)));
  }
  r.blas = blas_family(r.sgemm_file);
  r.blas_threading = "unknown";
  // OpenBLAS reports itself; looked up by name so another BLAS simply leaves these empty.
  using IntFn = int (*)();
  using StrFn = char* (*)();
  if (auto p = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "openblas_get_parallel")))
    r.blas_threading = openblas_threading(p());
  if (auto c = reinterpret_cast<StrFn>(dlsym(RTLD_DEFAULT, "openblas_get_config")))
    r.openblas_config = c();
  if (auto c = reinterpret_cast<StrFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename")))
    r.openblas_corename = c();
  if (auto n = reinterpret_cast<IntFn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads")))
    r.blas_threads = n();
  if (const char* e = std::getenv("OPENBLAS_CORETYPE")) r.coretype_env = e;
  r.onednn = onednn_version() + ", " + onednn_isa();
  r.threads = threads;
  r.omp_max_threads = omp_get_max_threads();
  r.omp_wait = openmp_wait().policy;
  cpu_set_t set;
  r.cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : omp_get_num_procs();
  return r;
}

// Debian's multiarch triplet of this build, for the update-alternatives hint.
#if defined(__aarch64__)
constexpr const char* kMultiarch = "aarch64-linux-gnu";
#else
constexpr const char* kMultiarch = "x86_64-linux-gnu";
#endif

std::vector<std::string> comparison_problems(const RuntimeInfo& r) {
  std::vector<std::string> p;
  const std::string who = r.framework.empty() ? "this process" : r.framework;
  if (r.blas == "reference")
    p.push_back(who + " runs on the reference BLAS (" + r.sgemm_file +
                ", Debian's libblas3), many times slower than an optimized BLAS: point "
                "libblas.so.3 at OpenBLAS (apt-get install libopenblas0-openmp, or "
                "update-alternatives --config libblas.so.3-" +
                std::string(kMultiarch) + ")");
  const int omp = std::max(r.threads, r.omp_max_threads);
  if (r.blas == "openblas" && r.blas_threading == "pthreads" && omp > 1 && r.blas_threads > 1)
    p.push_back(who + " runs a pthread OpenBLAS (" + std::to_string(r.blas_threads) +
                " threads of its own) inside " + std::to_string(omp) + " OpenMP threads: up to " +
                std::to_string(omp * r.blas_threads) + " threads on " + std::to_string(r.cores) +
                " cores; use the OpenMP build (libopenblas0-openmp) or OPENBLAS_NUM_THREADS=1");
  if (r.cores > 0 && omp > r.cores)
    p.push_back(who + " runs " + std::to_string(omp) + " threads on " + std::to_string(r.cores) +
                " cores (oversubscribed)");
  return p;
}

std::vector<std::string> runtime_notes(const RuntimeInfo& qkv, const RuntimeInfo* torch) {
  std::vector<std::string> notes;
  auto forced = [](const RuntimeInfo* r) {
    return r && !r->coretype_env.empty() && r->blas == "openblas";
  };
  auto note = [&](const std::string& who, const std::string& core) {
    notes.push_back("OPENBLAS_CORETYPE=" + core + " makes " + who + " run OpenBLAS's " + core +
                    " kernels instead of the ones it picks for this CPU: the sgemm peak and the "
                    "GEMMs are those kernels' (unset it to measure a default setup)");
  };
  if (forced(&qkv) && forced(torch) && qkv.coretype_env == torch->coretype_env) {
    note("both sides", qkv.coretype_env);
  } else {
    if (forced(&qkv)) note("qkv", qkv.coretype_env);
    if (forced(torch)) note("torch", torch->coretype_env);
  }
  if (torch && qkv.blas == "openblas" && torch->blas == "openblas" &&
      qkv.openblas_corename != torch->openblas_corename)
    notes.push_back("qkv runs OpenBLAS's " + qkv.openblas_corename + " kernels, torch its " +
                    torch->openblas_corename + " kernels");
  return notes;
}

std::string describe(const RuntimeInfo& r) {
  std::ostringstream s;
  s << r.framework << ": ";
  if (r.blas == "openblas") {
    // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the name and version are enough here
    std::istringstream config(r.openblas_config);
    std::string name, version;
    config >> name >> version;
    s << "OpenBLAS " << version << " (" << r.blas_threading << " build, "
      << (r.openblas_corename.empty() ? "?" : r.openblas_corename) << " kernels, " << r.blas_threads
      << " BLAS threads)";
  } else {
    s << r.blas << " BLAS";
  }
  s << " from " << (r.sgemm_file.empty() ? "an unknown file" : r.sgemm_file)
    << "; OPENBLAS_CORETYPE=" << (r.coretype_env.empty() ? "(unset)" : r.coretype_env) << "; "
    << r.threads << " threads";
  if (r.interop_threads > 0) s << " (+" << r.interop_threads << " inter-op)";
  s << ", OpenMP max " << r.omp_max_threads << ", " << r.cores << " cores";
  if (!r.onednn.empty()) s << "; oneDNN " << r.onednn;
  if (!r.omp_wait.empty()) s << "; OpenMP waits: " << r.omp_wait;
  return s.str();
}

nlohmann::json to_json(const RuntimeInfo& r) {
  return {{"framework", r.framework},
          {"sgemm_file", r.sgemm_file},
          {"blas_files", r.blas_files},
          {"blas", r.blas},
          {"blas_threading", r.blas_threading},
          {"openblas_config", r.openblas_config},
          {"openblas_corename", r.openblas_corename},
          {"blas_threads", r.blas_threads},
          {"openblas_coretype_env", r.coretype_env},
          {"threads", r.threads},
          {"interop_threads", r.interop_threads},
          {"omp_max_threads", r.omp_max_threads},
          {"cores", r.cores},
          {"onednn", r.onednn},
          {"omp_wait", r.omp_wait}};
}

RuntimeInfo runtime_from_json(const nlohmann::json& j) {
  RuntimeInfo r;
  r.framework = j.value("framework", "");
  r.sgemm_file = j.value("sgemm_file", "");
  r.blas_files = j.value("blas_files", std::vector<std::string>{});
  r.blas = blas_family(r.sgemm_file);
  r.blas_threading = j.value("blas_threading", "unknown");
  r.openblas_config = j.value("openblas_config", "");
  r.openblas_corename = j.value("openblas_corename", "");
  r.blas_threads = j.value("blas_threads", -1);
  r.coretype_env = j.value("openblas_coretype_env", "");
  r.threads = j.value("threads", 0);
  r.interop_threads = j.value("interop_threads", 0);
  r.omp_max_threads = j.value("omp_max_threads", 0);
  r.cores = j.value("cores", 0);
  r.onednn = j.value("onednn", "");
  r.omp_wait = j.value("omp_wait", "");
  return r;
}

}  // namespace qkv::bench
