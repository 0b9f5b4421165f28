#include "runfolder/provenance.hpp"

#include <fstream>
#include <sstream>

#include "bench/bench_runtime.hpp"
#include "core/atomic_file.hpp"
#include "core/attention_backend.hpp"
#include "core/bounded_json.hpp"
#include "core/machine.hpp"
#include "core/onednn.hpp"
#include "core/openmp_wait.hpp"
#include "runfolder/build_info.hpp"
#include "runfolder/run_file.hpp"

namespace qkv::run {

using nlohmann::json;

namespace {

// The first "model name" and "flags" lines of /proc/cpuinfo (x86; other machines may lack them).
json cpu_info() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown";
  std::vector<std::string> features;
  bool have_flags = false;
  while (std::getline(in, line) && (model == "unknown" || !have_flags)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && model == "unknown") model = value;
    if ((key == "flags" || key == "Features") && !have_flags) {
      std::istringstream words(value);
      for (std::string w; words >> w;) features.push_back(w);
      have_flags = true;
    }
  }
  return {{"model", model}, {"features", features}};
}

// oneDNN: its version, the ISA its kernels dispatch to here (after ONEDNN_MAX_CPU_ISA) and
// whether that ISA runs bf16 products.
json onednn_info() {
  return {{"built", true},
          {"version", onednn_version()},
          {"isa", onednn_isa()},
          {"bf16", onednn_isa_has_bf16()}};
}

// bf16 attention's tile products: QKV_ATTENTION_BACKEND's setting and the kernel a short call
// (decoding's one query) and a long one (from kOnednnMinTokens queries and keys) run on here.
json attention_info() {
  return {{"setting", std::string(name_of(attention_backend()))},
          {"short", attention_backend_description(attention_backend_for(1, 1))},
          {"long", attention_backend_description(
                       attention_backend_for(kOnednnMinTokens, kOnednnMinTokens))}};
}

std::string kernels_of(const bench::RuntimeInfo& r, const json& onednn) {
  std::string k =
      r.blas == "openblas"
          ? "OpenBLAS " + (r.openblas_corename.empty() ? std::string("?") : r.openblas_corename)
          : r.blas + " BLAS";
  if (onednn.value("built", false)) k += ", oneDNN " + onednn.value("isa", std::string("?"));
  return k;
}

json precision_info(Precision asked, Precision ran) {
  json p = {{"asked", precision_name(asked)}, {"ran", precision_name(ran)}};
  if (asked == Precision::auto_ && ran == Precision::fp32) p["why"] = bf16_unsupported_reason();
  return p;
}

}  // namespace

json provenance(int threads, Precision asked, Precision ran) {
  const bench::RuntimeInfo r = bench::this_process(threads);
  const json onednn = onednn_info();
  return {{"qkv", {{"version", kQkvVersion}, {"commit", kGitCommit}, {"describe", kGitDescribe}}},
          {"compiler", kCompiler},
          {"blas",
           {{"library", r.blas},
            {"config", r.openblas_config},
            {"core", r.openblas_corename},
            {"threading", r.blas_threading},
            {"file", r.sgemm_file},
            {"coretype_env", r.coretype_env}}},
          {"onednn", onednn},
          {"attention", attention_info()},
          {"cpu", cpu_info()},
          {"cores", usable_cores()},
          {"threads", threads},
          {"precision", precision_info(asked, ran)},
          {"openmp_wait", {{"policy", openmp_wait().policy}, {"why", openmp_wait().why}}},
          {"kernels", kernels_of(r, onednn)}};
}

std::string kernels_now() { return kernels_of(bench::this_process(0), onednn_info()); }

json read_provenance(const std::string& run_dir) {
  const std::string path = run_dir + "/provenance.json";
  if (!std::filesystem::exists(std::filesystem::symlink_status(path))) return nullptr;
  // damaged (or too deep): the run still evaluates, it only cannot be compared
  std::string why;
  return try_parse_json(read_run_file(path, "provenance file", kMaxSmallJsonBytes), why)
      .value_or(nullptr);
}

std::string kernel_change(const std::string& run_dir, const std::string& doing) {
  const json p = read_provenance(run_dir);
  if (!p.is_object() || !p.contains("kernels") || !p["kernels"].is_string()) return "";
  const std::string then = p["kernels"].get<std::string>(), now = kernels_now();
  if (then == now) return "";
  return run_dir + " was trained on " + then + " kernels; this " + doing + " runs on " + now +
         ": the last bits of its numbers can differ";
}

}  // namespace qkv::run
