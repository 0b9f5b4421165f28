// qkv bench --gemm-shapes through the real binary: the step's GEMMs shape by shape; each
// precision's MFU against its own GEMM peak; and what the timed child reports for
// scripts/profile-bench.sh.
#include <time.h>

#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>

#include "support/process.hpp"

using namespace qkv::testing;

namespace {

// `qkv bench --json ARGS`, which must succeed, parsed.
nlohmann::json bench_json(const std::string& args) {
  const RunResult r = run_qkv("bench --json" + args);
  INFO(r.output);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.output.substr(r.output.find('{')));
}

}  // namespace

TEST_CASE("bench --gemm-shapes: every linear layer's three GEMMs, in the JSON and the table") {
  const std::string quick = " --model tiny --repeats 1 --min-seconds 0 --passive --gemm-shapes";
  const nlohmann::json j = bench_json(quick);
  const nlohmann::json& shapes = j["models"][0]["qkv"]["gemm_shapes"];
  REQUIRE(shapes.is_array());
  // tiny: 2 + 2 layers, d 64, FFN 256, 16 symbols. Its linear layers: 8 attention projections
  // in the encoder, 16 in the decoder (self and cross), 8 FFN layers and the output layer,
  // 33 in all. Each is one GEMM forward (x w^T: NT) and two backward (dx: NN, dw: TN).
  std::map<std::string, double> calls;
  double ms = 0;
  for (const nlohmann::json& s : shapes) {
    calls[s["op"].get<std::string>()] += s["calls_per_step"].get<double>();
    ms += s["ms_per_step"].get<double>();
    CHECK(s["gflops"].get<double>() > 0);
  }
  CHECK(calls["NT"] == 33);
  CHECK(calls["NN"] == 33);
  CHECK(calls["TN"] == 33);
  CHECK(calls.size() == 3);
  for (const nlohmann::json& s : shapes) CHECK(s["backend"] == "OpenBLAS f32");
  // Where bf16 runs (--precision auto, the default), the bf16 step's same 99 linear products all
  // run on oneDNN in bf16; attention's tiles are not among them (fused attention runs them on
  // qkv's own bf16 tile kernel, core/attention_bf16.*, which the GEMM timers do not see).
  if (j["models"][0].contains("qkv_bf16")) {
    std::map<std::string, double> bf16_calls;
    for (const nlohmann::json& s : j["models"][0]["qkv_bf16"]["gemm_shapes"]) {
      CHECK(s["backend"] == "oneDNN bf16");
      bf16_calls[s["op"].get<std::string>()] += s["calls_per_step"].get<double>();
    }
    CHECK(bf16_calls == calls);
  }
  // (Not compared with the step's time: the GEMMs are timed in other steps, and under ctest -j
  // another test's load may land on those and not on the timed ones.)
  CHECK(ms > 0);
  // The step in two: its products at their loop rate, summed from the same shapes (one round:
  // the round's own sum), and everything else, the step's time minus that.
  for (const char* side : {"qkv", "qkv_bf16"}) {
    if (!j["models"][0].contains(side)) continue;
    const nlohmann::json& q = j["models"][0][side];
    double loop = 0;
    for (const nlohmann::json& s : q["gemm_shapes"]) loop += s["loop_ms_per_step"].get<double>();
    CHECK(q["products_loop_ms"].get<double>() == Approx(loop).epsilon(1e-9));
    CHECK(q["everything_else_ms"].get<double>() ==
          Approx(q["ms_per_step"].get<double>() - loop).epsilon(1e-9));
  }
  // The same steps' parallel regions (2 threads): time inside them within the step, each
  // thread's work within that.
  const nlohmann::json& par = j["models"][0]["qkv"]["parallel_regions"];
  CHECK(par["regions_per_step"].get<double>() > 10);
  CHECK(par["ms_per_step"].get<double>() > 0);
  CHECK(par["ms_per_step"].get<double>() <= par["step_ms"].get<double>());
  for (const nlohmann::json& busy : par["busy_ms_per_step"]) {
    CHECK(busy.get<double>() > 0);
    CHECK(busy.get<double>() <= par["ms_per_step"].get<double>());
  }

  const RunResult t = run_qkv("bench" + quick);
  INFO(t.output);
  REQUIRE(t.status == 0);
  CHECK(t.output.find("GEMMs in one training step of tiny") != std::string::npos);
  CHECK(t.output.find("| 2048 x 64, k 64 | NT | OpenBLAS f32 | 24 |") !=
        std::string::npos);  // q, k, v, o
  CHECK(t.output.find("| all GEMMs |") != std::string::npos);
  CHECK(t.output.find("| % sgemm peak | alone in a loop, ms/step | % sgemm peak |") !=
        std::string::npos);
  CHECK(t.output.find("| model | precision | step ms | products at their loop rate, ms | "
                      "everything else, ms |") != std::string::npos);
  CHECK(t.output.find("| tiny | fp32 |") != std::string::npos);
  CHECK(t.output.find("Parallel regions in the same steps:") != std::string::npos);
}

TEST_CASE("bench: MFU of each precision's step against that precision's GEMM peak") {
  const std::string quick = " --model tiny --repeats 1 --min-seconds 0 --passive";
  const nlohmann::json j = bench_json(quick);
  const nlohmann::json& e = j["models"][0];
  CHECK(e["precision"] == "fp32");  // auto: the main table in fp32, bf16 beside it
  // fp32 against the sgemm peak, bf16 against oneDNN's bf16 GEMM peak
  const double sgemm = j["sgemm_peak_gflops"].get<double>();
  CHECK(e["qkv"]["mfu"].get<double>() ==
        Approx(e["qkv"]["gflops"].get<double>() / sgemm).epsilon(1e-9));
  const bool bf16 = qkv::bf16_unsupported_reason().empty();
  CHECK(e.contains("qkv_bf16") == bf16);
  CHECK(j.contains("bf16_gemm_peak_gflops") == bf16);
  if (bf16) {
    const double peak = j["bf16_gemm_peak_gflops"].get<double>();
    CHECK(peak != Approx(sgemm).epsilon(1e-3));  // the two peaks are told apart
    CHECK(e["qkv_bf16"]["mfu"].get<double>() ==
          Approx(e["qkv_bf16"]["gflops"].get<double>() / peak).epsilon(1e-9));
  }
  const RunResult t = run_qkv("bench" + quick);
  INFO(t.output);
  REQUIRE(t.status == 0);
  // the main table's MFU column; where bf16 runs, the bf16 table's MFU of each precision
  const char* header = "| model | ms/step | tokens/s | GFLOP/s | MFU | peak MB |";
  const char* bf16_header = "| qkv bf16 ms | bf16/fp32 | fp32 MFU | bf16 MFU |";
  CHECK(t.output.find(header) != std::string::npos);
  CHECK((t.output.find(bf16_header) != std::string::npos) == bf16);
}

TEST_CASE("bench --precision bf16 alone: one table in bf16, MFU against the bf16 GEMM peak") {
  SKIP_WITHOUT_BF16();
  const std::string quick =
      " --model tiny --repeats 1 --min-seconds 0 --passive --precision bf16 --gemm-shapes";
  const nlohmann::json j = bench_json(quick);
  const nlohmann::json& e = j["models"][0];
  CHECK(e["precision"] == "bf16");
  CHECK_FALSE(e.contains("qkv_bf16"));  // no fp32 run to stand beside
  const double gflops = e["qkv"]["gflops"].get<double>();
  CHECK(e["qkv"]["mfu"].get<double>() ==
        Approx(gflops / j["bf16_gemm_peak_gflops"].get<double>()).epsilon(1e-9));
  for (const nlohmann::json& s : e["qkv"]["gemm_shapes"]) CHECK(s["backend"] == "oneDNN bf16");
  const RunResult t = run_qkv("bench" + quick);
  INFO(t.output);
  REQUIRE(t.status == 0);
  CHECK(t.output.find("bf16 products, f32 accumulation") != std::string::npos);
  CHECK(t.output.find("GEMMs in one training step of tiny in bf16") != std::string::npos);
  // bf16 products against the bf16 GEMM's peak, in the step and alone in a loop
  CHECK(t.output.find("| % bf16 GEMM peak | alone in a loop, ms/step | % bf16 GEMM peak |") !=
        std::string::npos);
  CHECK(t.output.find("| tiny | bf16 |") != std::string::npos);
}

TEST_CASE("bench --child: when the timed steps began, on CLOCK_MONOTONIC for profile-bench.sh") {
  timespec before{};
  ::clock_gettime(CLOCK_MONOTONIC, &before);
  const RunResult r = run_qkv("bench --child --model tiny --min-seconds 0 --passive");
  timespec after{};
  ::clock_gettime(CLOCK_MONOTONIC, &after);
  INFO(r.output);
  REQUIRE(r.status == 0);
  const nlohmann::json j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  const double from = j["timed_from_monotonic_s"].get<double>();
  // After the process started and its 3 warm-up steps, before it ended.
  CHECK(from > double(before.tv_sec) + before.tv_nsec * 1e-9);
  CHECK(from < double(after.tv_sec) + after.tv_nsec * 1e-9);
}

TEST_CASE("bench --gemm-shapes: refused where there is no training step to time") {
  for (const char* other : {"--attention-sweep", "--scaling"}) {
    const RunResult r = run_qkv(std::string("bench --gemm-shapes ") + other);
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find(std::string("--gemm-shapes") +
                        " times the models' training steps; it "
                        "does not apply to " +
                        other) != std::string::npos);
  }
}
