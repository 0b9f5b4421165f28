// qkv bench --compare through the real binary and the real PyTorch (/usr/bin/python3 with
// python3-torch): each side's BLAS and threads are reported, and a comparison against PyTorch
// on the reference BLAS (made here with LD_LIBRARY_PATH pointing at Debian's libblas3) or with
// more threads than cores is refused, or with --allow-unfair flagged.
#include <sched.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/process.hpp"

using namespace qkv::testing;

namespace {

// --passive: idle threads sleep, so a busy test machine does not stretch the runs many times
const char* kQuick = " --model tiny --repeats 1 --min-seconds 0 --passive";
// Debian's libblas3: the netlib reference BLAS, kept beside OpenBLAS by the alternatives system.
const char* kReferenceBlasDir = "/usr/lib/x86_64-linux-gnu/blas";

// Runs a whole shell command line (here: qkv under a changed environment), output captured.
RunResult run_qkv_cmd(const std::string& cmd) {
  RunResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

nlohmann::json last_json(const std::string& out) {
  return nlohmann::json::parse(out.substr(out.find("\n{") + 1));
}

}  // namespace

TEST_CASE("bench --compare: both sides' BLAS and threads in the JSON") {
  const RunResult r = run_qkv(std::string("bench --compare --json --threads 1") + kQuick);
  INFO(r.output);
  REQUIRE(r.status == 0);
  const nlohmann::json j = last_json("\n" + r.output);
  const nlohmann::json& q = j["runtime"]["qkv"];
  const nlohmann::json& t = j["runtime"]["torch"];
  CHECK(q["blas"] == "openblas");
  CHECK(q["blas_threading"] == "openmp");
  CHECK(q["threads"] == 1);
  CHECK(t["threads"] == 1);        // torch.set_num_threads(qkv's)
  CHECK(t["sgemm_file"] != "");    // found in PyTorch's own memory map
  CHECK(t["blas"] == "openblas");  // what install-deps.sh sets up
  CHECK(j["problems"]["qkv"].empty());
  CHECK(j["problems"]["torch"].empty());
  CHECK(j["torch_options"].contains("adam_foreach"));
  // and each timed process's own report
  CHECK(j["models"][0]["torch"]["runtime"]["sgemm_file"] == t["sgemm_file"]);
  CHECK(j["models"][0]["qkv"]["runtime"]["sgemm_file"] == q["sgemm_file"]);
  // Each side's MFU: fp32 against the sgemm peak, bf16 (beside it where bf16 runs: --precision
  // auto) against the bf16 GEMM peak, measured once for both sides.
  const nlohmann::json& e = j["models"][0];
  const auto mfu_of = [&](const char* side, const char* peak) {
    INFO(side << " against " << peak);
    CHECK(e[side]["mfu"].get<double>() ==
          Approx(e[side]["gflops"].get<double>() / j[peak].get<double>()).epsilon(1e-9));
  };
  mfu_of("qkv", "sgemm_peak_gflops");
  mfu_of("torch", "sgemm_peak_gflops");
  const bool bf16 = qkv::bf16_unsupported_reason().empty();
  CHECK(e.contains("torch_bf16") == bf16);
  if (bf16) {
    mfu_of("qkv_bf16", "bf16_gemm_peak_gflops");
    mfu_of("torch_bf16", "bf16_gemm_peak_gflops");
  }
}

TEST_CASE("bench --compare: PyTorch on the reference BLAS is refused, or flagged") {
  if (!std::filesystem::exists(std::string(kReferenceBlasDir) + "/libblas.so.3"))
    QKV_SKIP("Debian's reference BLAS (libblas3) is not installed");
  // libtorch_cpu needs libblas.so.3: this directory's copy wins over the alternatives link.
  // qkv links libopenblas.so.0, which is not there, so only the PyTorch side changes.
  const std::string env = std::string("env LD_LIBRARY_PATH=") + kReferenceBlasDir + " '" +
                          qkv_binary() + "' bench --compare --threads 1" + kQuick;
  const RunResult refused = run_qkv_cmd(env);
  INFO(refused.output);
  CHECK(refused.status != 0);
  CHECK(refused.output.find("torch runs on the reference BLAS") != std::string::npos);
  CHECK(refused.output.find("--allow-unfair") != std::string::npos);
  CHECK(refused.output.find("| tiny |") == std::string::npos);  // nothing timed

  const RunResult flagged = run_qkv_cmd(env + " --allow-unfair");
  INFO(flagged.output);
  REQUIRE(flagged.status == 0);
  CHECK(flagged.output.find("torch: reference BLAS from") != std::string::npos);
  CHECK(flagged.output.find(" ! |") != std::string::npos);  // the torch time is marked
  CHECK(flagged.output.find("! torch runs on the reference BLAS") != std::string::npos);
}

TEST_CASE("bench --compare: more threads than cores is refused") {
  cpu_set_t set;
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  const int cores = CPU_COUNT(&set);
  const RunResult r = run_qkv("bench --compare --threads " + std::to_string(cores + 1) + kQuick);
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find("qkv runs " + std::to_string(cores + 1) + " threads on " +
                      std::to_string(cores) + " cores (oversubscribed)") != std::string::npos);
}
