// qkv bench [--model NAME ...] [--threads N] [--json] [--compare] [--repeats R]
//
// Times full training steps (forward, backward, Adam) of fixed models after warm-up. Each
// model runs in its own child process (this binary with --child), so its peak resident
// memory is its own; with --compare the PyTorch reference (apps/bench_reference.py, run by
// /usr/bin/python3) runs the same model in its own process right after, and the two
// alternate for --repeats rounds so machine load hits both alike. Reported per side: the
// median over rounds of each process's median step time.
//
// Data parallelism: `mpirun -np N qkv bench --data-parallel --model small` times steps in
// which each rank runs its shard of the global batch and the gradients are summed over the
// ranks (run/distributed.hpp); `qkv bench --scaling` runs N=1 with T threads and N=2 with
// T/2 threads each (the same cores, the same global batch) and prints the efficiency
// (step time N=1) / (step time N=2).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/bench_models.hpp"
#include "apps/commands.hpp"
#include "bench/bench_runtime.hpp"
#include "bench/bench_util.hpp"
#include "bench/gemm_shapes.hpp"
#include "bench/peaks.hpp"
#include "core/openmp_wait.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "core/tensor.hpp"
#include "run/distributed.hpp"

#ifndef QKV_SOURCE_DIR
#define QKV_SOURCE_DIR "."
#endif

namespace qkv::app {
namespace {

// The children's wait policy, the same for both sides: passive with --passive or when this
// process chose it at start (core/openmp_wait.hpp); otherwise libgomp's default spin count
// named, so that the qkv child does not choose again and the torch child spins alike. Nothing
// when the user set the policy (the children inherit it).
std::string child_wait_env(bool passive) {
  const std::string policy = openmp_wait().policy;
  if (passive || policy == "passive") return "OMP_WAIT_POLICY=passive ";
  if (policy == "spin") return "GOMP_SPINCOUNT=300000 ";
  return "";
}

// The wait policy's name for the bench's header and JSON.
std::string wait_name(bool passive) {
  const std::string env = child_wait_env(passive);
  return env.empty() ? openmp_wait().policy : env.substr(0, env.size() - 1);
}

using namespace bench;

using nlohmann::json;

// The data-parallel scaling runs: per model, each round's step time with N=1 x T threads
// (one), with N=2 x T/2 threads (two), and the N=2 gradient allreduce in a step and alone.
struct ScalingRuns {
  std::map<std::string, std::vector<double>> one, two, reduce_ms, alone_ms;
};

// Alternates N=1 and N=2 (mpirun -np 2) for --repeats rounds; a progress line per run on
// stderr unless --json.
ScalingRuns run_scaling_rounds(const BenchArgs& a, const std::vector<std::string>& names) {
  const std::string self = shell_quote(self_exe());
  // Root in a container needs --allow-run-as-root; no binding, as the N=1 run is unbound.
  const std::string mpirun = std::string("mpirun") +
                             (::geteuid() == 0 ? " --allow-run-as-root" : "") +
                             " --oversubscribe --bind-to none -np 2 ";
  const std::string env = child_wait_env(a.passive);
  auto args = [&](const std::string& n, int threads) {
    return " bench --data-parallel --json --model " + n + " --threads " + std::to_string(threads) +
           " --min-seconds " + std::to_string(a.min_seconds);
  };
  ScalingRuns s;
  for (int r = 0; r < a.repeats; ++r) {
    for (const std::string& n : names) {
      const json j1 = run_child(env + self + args(n, a.threads));
      const json j2 = run_child(env + mpirun + self + args(n, a.threads / 2));
      QKV_CHECK(j2.value("ranks", 0) == 2, "bench", "mpirun did not start 2 ranks: ", j2.dump());
      s.one[n].push_back(j1["ms_per_step"].get<double>());
      s.two[n].push_back(j2["ms_per_step"].get<double>());
      s.reduce_ms[n].push_back(j2["allreduce_ms_per_step"].get<double>());
      s.alone_ms[n].push_back(j2["allreduce_alone_ms"].get<double>());
      if (!a.json)
        std::fprintf(stderr,
                     "round %d/%d %s: N=1 %.2f ms, N=2 %.2f ms (allreduce %.2f ms in a step, "
                     "%.2f ms alone)\n",
                     r + 1, a.repeats, n.c_str(), s.one[n].back(), s.two[n].back(),
                     s.reduce_ms[n].back(), s.alone_ms[n].back());
    }
  }
  return s;
}

// The scaling runs as --json prints them: medians over the rounds and the runs themselves.
json scaling_result(const BenchArgs& a, const std::vector<std::string>& names, const ScalingRuns& s,
                    double load_before) {
  json result;
  result["machine"] = {{"cpu", cpu_model()},
                       {"cores", omp_get_num_procs()},
                       {"load_average_before", load_before},
                       {"load_average_after", load_average()}};
  result["threads_total"] = a.threads;
  result["repeats"] = a.repeats;
  result["models"] = json::array();
  for (const std::string& n : names) {
    const double t1 = median(s.one.at(n)), t2 = median(s.two.at(n));
    result["models"].push_back({{"model", n},
                                {"global_batch", find_model(n).batch},
                                {"n1_ms_per_step", t1},
                                {"n2_ms_per_step", t2},
                                {"efficiency", t1 / t2},
                                {"n2_allreduce_ms_per_step", median(s.reduce_ms.at(n))},
                                {"n2_allreduce_alone_ms", median(s.alone_ms.at(n))},
                                {"n1_runs_ms", s.one.at(n)},
                                {"n2_runs_ms", s.two.at(n)}});
  }
  return result;
}

// The scaling result as a Markdown table, under a line on the machine and its load.
void print_scaling_table(const BenchArgs& a, const json& result, double load_before) {
  std::printf(
      "%s, %d cores; load %.2f -> %.2f; median of %d rounds; the same global batch and "
      "%d threads in total on both sides\n\n",
      cpu_model().c_str(), omp_get_num_procs(), load_before, load_average(), a.repeats, a.threads);
  std::printf(
      "| model | global batch | N=1 x %d threads ms/step | N=2 x %d thread%s ms/step | "
      "efficiency | N=2 allreduce ms in a step | N=2 allreduce ms alone |\n",
      a.threads, a.threads / 2, a.threads / 2 == 1 ? "" : "s");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  for (const json& e : result["models"])
    std::printf(
        "| %s | %lld | %.2f | %.2f | %.2f | %.2f | %.2f |\n", e["model"].get<std::string>().c_str(),
        static_cast<long long>(e["global_batch"].get<int64_t>()), e["n1_ms_per_step"].get<double>(),
        e["n2_ms_per_step"].get<double>(), e["efficiency"].get<double>(),
        e["n2_allreduce_ms_per_step"].get<double>(), e["n2_allreduce_alone_ms"].get<double>());
}

// The data-parallel scaling table: each model with N=1 x T threads and N=2 x T/2 threads
// (mpirun -np 2), alternating for --repeats rounds; the median step time of each side.
int bench_scaling(const BenchArgs& a, const std::vector<std::string>& names) {
  QKV_CHECK(run::dist::compiled_with_mpi(), "bench",
            "--scaling needs qkv built with MPI (QKV_MPI=ON)");
  QKV_CHECK(run::dist::size() == 1, "bench",
            "--scaling starts mpirun itself; run it without mpirun");
  QKV_CHECK(a.threads >= 2 && a.threads % 2 == 0, "bench",
            "--scaling splits --threads between 2 "
            "processes: give an even number >= 2, got ",
            a.threads);
  const double load_before = load_average();
  const ScalingRuns runs = run_scaling_rounds(a, names);
  const json result = scaling_result(a, names, runs, load_before);
  if (a.json) {
    std::printf("%s\n", result.dump(2).c_str());
    return 0;
  }
  print_scaling_table(a, result, load_before);
  return 0;
}

// What each side computes on, and whether the comparison is worth printing: qkv from this
// process (its children run this binary with the same environment and thread count), PyTorch
// from `bench_reference.py --describe` run as the timed children are. A side with a problem
// (comparison_problems) stops the bench unless --allow-unfair, which flags it in the table.
struct Sides {
  RuntimeInfo qkv, torch;
  std::vector<std::string> qkv_problems, torch_problems;
};

Sides check_sides(const BenchArgs& a, int threads, const std::string& env,
                  const std::string& script) {
  Sides s;
  s.qkv = this_process(threads);
  s.qkv_problems = comparison_problems(s.qkv);
  if (a.compare) {
    const json d = run_child(env + "/usr/bin/python3 " + shell_quote(script) +
                             " --describe --threads " + std::to_string(threads));
    s.torch = runtime_from_json(d.at("runtime"));
    s.torch_problems = comparison_problems(s.torch);
  }
  std::string all;
  for (const auto* list : {&s.qkv_problems, &s.torch_problems})
    for (const std::string& p : *list) all += "\n  " + p;
  if (!all.empty() && a.compare && !a.allow_unfair)
    throw Error("bench: not a comparison worth printing:" + all +
                "\n(--allow-unfair runs it anyway and flags it in the table)");
  if (!all.empty() && !a.json) std::fprintf(stderr, "bench: warning:%s\n", all.c_str());
  return s;
}

// The models to time: --model, or by default all of them (small and annotated for the
// data-parallel benchmarks); an unknown name is refused.
std::vector<std::string> model_names(const BenchArgs& a) {
  std::vector<std::string> names = a.models;
  if (names.empty() && (a.scaling || a.data_parallel)) names = {"small", "annotated"};
  if (names.empty())
    for (const BenchModel& m : models()) names.push_back(m.name);
  for (const std::string& n : names) (void)find_model(n);
  return names;
}

// A data-parallel timing as one line of text.
void print_data_parallel_line(const std::string& name, const json& j) {
  std::printf(
      "%s: %.2f ms/step, %d process(es) x %d thread(s), global batch %lld; gradient "
      "allreduce %.2f ms in a step (%lld buckets), %.2f ms alone\n",
      name.c_str(), j["ms_per_step"].get<double>(), j["ranks"].get<int>(), j["threads"].get<int>(),
      static_cast<long long>(j["global_batch"].get<int64_t>()),
      j["allreduce_ms_per_step"].get<double>(),
      static_cast<long long>(j["allreduce_buckets"].get<int64_t>()),
      j["allreduce_alone_ms"].get<double>());
}

// --child and --data-parallel: the models timed in this process (under mpirun, on every rank;
// rank 0 reports), each as one JSON line, or with --data-parallel and no --json one text line.
int bench_in_process(const BenchArgs& a, const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    const json j = run_one(find_model(n), a.min_seconds, a.data_parallel, a.gemm_shapes,
                           resolve_precision(a.precision, "bench: --precision"));
    if (!run::dist::is_root()) continue;  // data-parallel: rank 0 reports
    if (a.child || a.json)
      std::printf("%s\n", j.dump().c_str());
    else
      print_data_parallel_line(n, j);
    std::fflush(stdout);
  }
  return 0;
}

// How the timed children start: this binary and the PyTorch script, with the same environment
// and thread count.
struct Children {
  int threads;
  std::string self, script, env;
};

// Every round's results per model, one JSON object per child process, and each round's sgemm
// peak (and bf16 GEMM peak when bf16 runs).
struct Rounds {
  // The main table's runs: fp32, or bf16 when --precision bf16 asked for bf16 alone.
  std::map<std::string, std::vector<json>> qkv, torch;
  Precision precision = Precision::fp32;
  // bf16 beside fp32 (--precision auto where bf16 runs); empty otherwise.
  std::map<std::string, std::vector<json>> qkv_bf16, torch_bf16;
  std::vector<double> peaks, bf16_peaks;
};

// The roofs of MFU: the best round of each precision's GEMM (load only ever lowers a timing, so
// the best round is the closest to the machine's peak); bf16 0 when bf16 did not run.
struct Peaks {
  double fp32 = 0, bf16 = 0;
};

Peaks best_peaks(const Rounds& r) {
  Peaks p;
  p.fp32 = *std::max_element(r.peaks.begin(), r.peaks.end());
  if (!r.bf16_peaks.empty()) p.bf16 = *std::max_element(r.bf16_peaks.begin(), r.bf16_peaks.end());
  return p;
}

// The precisions both sides run: --precision, with auto meaning fp32 and, where bf16 can run
// here, bf16 too. bf16 asked for where it cannot run is one error before any child starts.
std::vector<Precision> bench_precisions(const BenchArgs& a) {
  const Precision p = a.precision;
  if (p == Precision::auto_) {
    if (resolve_precision(p) == Precision::bf16) return {Precision::fp32, Precision::bf16};
    return {Precision::fp32};
  }
  return {resolve_precision(p, "bench: --precision")};
}

// --repeats rounds, each model's qkv child then (with --compare) its PyTorch child, so machine
// load hits both alike; a progress line per model and round on stderr unless --json.
Rounds run_rounds(const BenchArgs& a, const std::vector<std::string>& names, const Children& c) {
  Rounds rounds;
  const std::vector<Precision> precisions = bench_precisions(a);
  const bool beside = precisions.size() > 1;  // bf16 in a table of its own beside fp32
  rounds.precision = precisions.front();
  for (int r = 0; r < a.repeats; ++r) {
    rounds.peaks.push_back(sgemm_peak_gflops());
    if (std::count(precisions.begin(), precisions.end(), Precision::bf16))
      rounds.bf16_peaks.push_back(bf16_gemm_peak_gflops());
    for (const std::string& n : names) {
      const std::string common = " --model " + n + " --threads " + std::to_string(c.threads) +
                                 " --min-seconds " + std::to_string(a.min_seconds);
      const std::string shapes = a.gemm_shapes ? " --gemm-shapes" : "";
      for (Precision p : precisions) {
        const bool bf16 = p == Precision::bf16;
        auto& qkv = bf16 && beside ? rounds.qkv_bf16 : rounds.qkv;
        auto& torch = bf16 && beside ? rounds.torch_bf16 : rounds.torch;
        const std::string prec = std::string(" --precision ") + precision_name(p);
        qkv[n].push_back(run_child(c.env + c.self + " bench --child" + common + shapes + prec));
        if (a.compare)
          torch[n].push_back(
              run_child(c.env + "/usr/bin/python3 " + shell_quote(c.script) + common + prec));
        if (a.json) continue;
        std::fprintf(stderr, "round %d/%d %s %s: qkv %.2f ms", r + 1, a.repeats, n.c_str(),
                     precision_name(p), qkv[n].back()["ms_per_step"].get<double>());
        if (a.compare)
          std::fprintf(stderr, ", torch %.2f ms", torch[n].back()["ms_per_step"].get<double>());
        std::fprintf(stderr, "\n");
      }
    }
  }
  return rounds;
}

// One side's rounds of one model: median step time, throughput, share of the sgemm peak, MFU
// (model FLOPs over the step time, as a share of the peak of the GEMM of the side's precision:
// mfu_peak) and the largest peak resident memory.
json summarize(const std::vector<json>& runs, const BenchModel& m, double peak, double mfu_peak) {
  std::vector<double> ms, rss;
  for (const json& j : runs) {
    ms.push_back(j["ms_per_step"].get<double>());
    rss.push_back(j["peak_rss_mb"].get<double>());
  }
  json s;
  s["ms_per_step"] = median(ms);
  s["tokens_per_s"] = tokens_per_step(m) / (median(ms) / 1e3);
  s["gflops"] = train_flops(m) / (median(ms) / 1e3) / 1e9;
  s["fraction_of_sgemm_peak"] = s["gflops"].get<double>() / peak;
  s["mfu"] = s["gflops"].get<double>() / mfu_peak;
  s["peak_rss_mb"] = *std::max_element(rss.begin(), rss.end());
  s["runs_ms"] = ms;
  return s;
}

// The step in two (bench/loop_rate.hpp): its products at their loop rate, the median over the
// runs, and everything else, the median step minus that. Nothing when the runs lack it.
void add_step_split(json& side, const std::vector<json>& runs) {
  std::vector<double> loop;
  for (const json& j : runs)
    if (j.contains("products_loop_ms")) loop.push_back(j["products_loop_ms"].get<double>());
  if (loop.empty()) return;
  side["products_loop_ms"] = median(loop);
  side["everything_else_ms"] = side["ms_per_step"].get<double>() - median(loop);
}

// One model's entry of the result: both sides summarized, qkv's allocator and page-fault
// counts, and with --compare the qkv/torch ratio.
json model_result(const BenchArgs& a, const std::string& n, const Rounds& rounds,
                  const Peaks& peaks) {
  const double peak = peaks.fp32;
  // MFU against the peak of the main table's precision
  const double mfu_peak = rounds.precision == Precision::bf16 ? peaks.bf16 : peak;
  const BenchModel& m = find_model(n);
  const std::vector<json>& qkv_runs = rounds.qkv.at(n);
  json e;
  e["model"] = n;
  e["precision"] = precision_name(rounds.precision);
  e["gflop_per_step"] = train_flops(m) / 1e9;
  e["qkv"] = summarize(qkv_runs, m, peak, mfu_peak);
  e["qkv"]["peak_tensor_mb"] = qkv_runs.back()["peak_tensor_mb"];
  e["qkv"]["system_allocs_per_step"] = qkv_runs.back()["system_allocs_per_step"];
  e["qkv"]["page_faults_per_step"] = qkv_runs.back()["page_faults_per_step"];
  e["qkv"]["created_mb_per_step"] = qkv_runs.back()["created_mb_per_step"];
  e["qkv"]["runtime"] = qkv_runs.back()["runtime"];  // the timed process's own report
  add_step_split(e["qkv"], qkv_runs);
  if (a.gemm_shapes)
    for (const char* key : {"gemm_shapes", "parallel_regions"})
      e["qkv"][key] = qkv_runs.back()[key];
  if (a.compare) {
    const std::vector<json>& torch_runs = rounds.torch.at(n);
    e["torch"] = summarize(torch_runs, m, peak, mfu_peak);
    e["torch"]["runtime"] = torch_runs.back()["runtime"];
    e["ratio"] = e["qkv"]["ms_per_step"].get<double>() / e["torch"]["ms_per_step"].get<double>();
  }
  if (rounds.qkv_bf16.count(n)) {  // bf16 beside fp32: each side's step, and its ratios
    const std::vector<json>& runs = rounds.qkv_bf16.at(n);
    e["qkv_bf16"] = summarize(runs, m, peak, peaks.bf16);
    e["qkv_bf16"]["created_mb_per_step"] = runs.back()["created_mb_per_step"];
    add_step_split(e["qkv_bf16"], runs);
    if (a.gemm_shapes)
      for (const char* key : {"gemm_shapes", "parallel_regions"})
        e["qkv_bf16"][key] = runs.back()[key];
    e["qkv_bf16_over_fp32"] =
        e["qkv_bf16"]["ms_per_step"].get<double>() / e["qkv"]["ms_per_step"].get<double>();
    if (a.compare) {
      e["torch_bf16"] = summarize(rounds.torch_bf16.at(n), m, peak, peaks.bf16);
      e["ratio_bf16"] =
          e["qkv_bf16"]["ms_per_step"].get<double>() / e["torch_bf16"]["ms_per_step"].get<double>();
      e["torch_bf16_over_fp32"] =
          e["torch_bf16"]["ms_per_step"].get<double>() / e["torch"]["ms_per_step"].get<double>();
    }
  }
  return e;
}

// The whole result as --json prints it: the machine, both sides' runtimes and problems, notes
// and every model.
json bench_result(const BenchArgs& a, const std::vector<std::string>& names, const Sides& sides,
                  const Rounds& rounds, int threads, double load_before, const Peaks& peaks) {
  json result;
  result["machine"] = {{"cpu", cpu_model()},
                       {"cores", omp_get_num_procs()},
                       {"load_average_before", load_before},
                       {"load_average_after", load_average()}};
  result["threads"] = threads;
  result["omp_wait_policy"] = wait_name(a.passive);
  result["repeats"] = a.repeats;
  result["sgemm_peak_gflops"] = peaks.fp32;
  result["sgemm_peak_rounds_gflops"] = rounds.peaks;
  if (peaks.bf16 > 0) {
    result["bf16_gemm_peak_gflops"] = peaks.bf16;
    result["bf16_gemm_peak_rounds_gflops"] = rounds.bf16_peaks;
  }
  result["runtime"] = {{"qkv", to_json(sides.qkv)}};
  result["problems"] = {{"qkv", sides.qkv_problems}};
  if (a.compare) {
    result["runtime"]["torch"] = to_json(sides.torch);
    result["problems"]["torch"] = sides.torch_problems;
    result["torch_options"] =
        rounds.torch.at(names.front()).back().value("options", json::object());
  }
  const std::vector<std::string> notes =
      runtime_notes(sides.qkv, a.compare ? &sides.torch : nullptr);
  result["notes"] = notes;
  result["models"] = json::array();
  for (const std::string& n : names) result["models"].push_back(model_result(a, n, rounds, peaks));
  return result;
}

// The lines above the table: machine, load, the GEMM peaks, both runtimes, the notes.
void print_bench_header(const BenchArgs& a, const json& result, const Sides& sides, int threads,
                        double load_before, const Peaks& peaks) {
  std::printf("%s, %d cores, %d threads%s; sgemm peak %.1f GFLOP/s", cpu_model().c_str(),
              omp_get_num_procs(), threads, (" (" + wait_name(a.passive) + ")").c_str(),
              peaks.fp32);
  if (peaks.bf16 > 0) std::printf(", bf16 GEMM peak %.1f GFLOP/s", peaks.bf16);
  std::printf("; load %.2f -> %.2f; median of %d rounds\n", load_before, load_average(), a.repeats);
  std::printf(
      "MFU: the model's matrix FLOPs per step (%s) over the step time, as a share of the peak of "
      "that precision's GEMM measured in this run (sgemm for fp32, oneDNN's bf16 GEMM for bf16)\n",
      "linear layers, output layer, attention's QK^T and PV; backward twice the forward");
  std::printf("%s\n", describe(sides.qkv).c_str());
  if (a.compare)
    std::printf("%s; options %s\n", describe(sides.torch).c_str(),
                result["torch_options"].dump().c_str());
  for (const json& n : result["notes"]) std::printf("note: %s\n", n.get<std::string>().c_str());
  std::printf("\n");
}

// bf16 beside fp32, a row per model: each side's step in both precisions, the ratios and the
// bf16 steps' MFU (against the bf16 GEMM peak).
void print_bf16_table(const BenchArgs& a, const json& result) {
  if (!result["models"].front().contains("qkv_bf16")) return;
  std::printf(
      "\nMixed precision (bf16 products, f32 accumulation; PyTorch under torch.autocast):\n\n");
  if (a.compare)
    std::printf(
        "| model | qkv fp32 ms | torch fp32 ms | qkv/torch fp32 | qkv bf16 ms | torch bf16 ms | "
        "qkv/torch bf16 | qkv bf16/fp32 | torch bf16/fp32 | qkv bf16 MFU | torch bf16 MFU |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  else
    std::printf(
        "| model | qkv fp32 ms | qkv bf16 ms | bf16/fp32 | fp32 MFU | bf16 MFU |\n"
        "|---|---:|---:|---:|---:|---:|\n");
  for (const json& e : result["models"]) {
    const double qf = e["qkv"]["ms_per_step"].get<double>();
    const double qb = e["qkv_bf16"]["ms_per_step"].get<double>();
    const double qmfu = 100 * e["qkv_bf16"]["mfu"].get<double>();
    if (!a.compare) {
      std::printf("| %s | %.2f | %.2f | %.2f | %.0f%% | %.0f%% |\n",
                  e["model"].get<std::string>().c_str(), qf, qb, qb / qf,
                  100 * e["qkv"]["mfu"].get<double>(), qmfu);
      continue;
    }
    const double tf = e["torch"]["ms_per_step"].get<double>();
    const double tb = e["torch_bf16"]["ms_per_step"].get<double>();
    std::printf(
        "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f%% | %.0f%% |\n",
        e["model"].get<std::string>().c_str(), qf, tf, qf / tf, qb, tb, qb / tb, qb / qf, tb / tf,
        qmfu, 100 * e["torch_bf16"]["mfu"].get<double>());
  }
}

// Where qkv's step goes, a row per model and precision: the step, its products each timed alone
// in a loop, and everything else.
void print_step_split(const json& result) {
  std::printf(
      "\nqkv's step in two: its products (those of matmul and linear, as one step records them; "
      "attention's tiles are not among them), each shape timed alone in a loop, and everything "
      "else (the step's time minus theirs):\n\n"
      "| model | precision | step ms | products at their loop rate, ms | everything else, ms | "
      "everything else, share |\n|---|---|---:|---:|---:|---:|\n");
  for (const json& e : result["models"])
    for (const char* side : {"qkv", "qkv_bf16"}) {
      if (!e.contains(side) || !e[side].contains("products_loop_ms")) continue;
      const json& q = e[side];
      const double step = q["ms_per_step"].get<double>();
      const double rest = q["everything_else_ms"].get<double>();
      const bool bf16 = std::string(side) == "qkv_bf16" || e["precision"] == "bf16";
      std::printf("| %s | %s | %.2f | %.2f | %.2f | %.0f%% |\n",
                  e["model"].get<std::string>().c_str(), bf16 ? "bf16" : "fp32", step,
                  q["products_loop_ms"].get<double>(), rest, 100 * rest / step);
    }
}

// The Markdown table, a row per model (with --compare both sides), then the problems found.
void print_bench_table(const BenchArgs& a, const json& result, const Sides& sides) {
  // A side the checks found unfair (run with --allow-unfair) is marked "!" beside its time.
  const char* qkv_mark = sides.qkv_problems.empty() ? "" : " !";
  const char* torch_mark = sides.torch_problems.empty() ? "" : " !";
  if (result["models"].front()["precision"] == "bf16")
    std::printf(
        "bf16 products, f32 accumulation (PyTorch under torch.autocast); MFU against the "
        "bf16 GEMM peak:\n\n");
  if (a.compare) {
    std::printf(
        "| model | qkv ms/step | torch ms/step | qkv/torch | qkv tokens/s | qkv GFLOP/s | "
        "qkv MFU | torch MFU | qkv peak MB | torch peak MB |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  } else {
    std::printf("| model | ms/step | tokens/s | GFLOP/s | MFU | peak MB |\n");
    std::printf("|---|---:|---:|---:|---:|---:|\n");
  }
  for (const json& e : result["models"]) {
    const json& q = e["qkv"];
    if (a.compare) {
      const json& t = e["torch"];
      std::printf("| %s | %.2f%s | %.2f%s | %.2f | %.0f | %.1f | %.0f%% | %.0f%% | %.0f | %.0f |\n",
                  e["model"].get<std::string>().c_str(), q["ms_per_step"].get<double>(), qkv_mark,
                  t["ms_per_step"].get<double>(), torch_mark, e["ratio"].get<double>(),
                  q["tokens_per_s"].get<double>(), q["gflops"].get<double>(),
                  100 * q["mfu"].get<double>(), 100 * t["mfu"].get<double>(),
                  q["peak_rss_mb"].get<double>(), t["peak_rss_mb"].get<double>());
    } else {
      std::printf("| %s | %.2f%s | %.0f | %.1f | %.0f%% | %.0f |\n",
                  e["model"].get<std::string>().c_str(), q["ms_per_step"].get<double>(), qkv_mark,
                  q["tokens_per_s"].get<double>(), q["gflops"].get<double>(),
                  100 * q["mfu"].get<double>(), q["peak_rss_mb"].get<double>());
    }
  }
  print_bf16_table(a, result);
  print_step_split(result);
  for (const auto* list : {&sides.qkv_problems, &sides.torch_problems})
    for (const std::string& p : *list) std::printf("\n! %s", p.c_str());
  if (!sides.qkv_problems.empty() || !sides.torch_problems.empty()) std::printf("\n");
}

// The models timed in child processes, qkv's and with --compare PyTorch's, alternating for
// --repeats rounds; a table, or with --json one JSON object.
int bench_in_children(const BenchArgs& a, const std::vector<std::string>& names) {
  Children c;
  c.threads = get_num_threads();
  c.self = shell_quote(self_exe());
  c.script =
      a.reference.empty() ? std::string(QKV_SOURCE_DIR) + "/apps/bench_reference.py" : a.reference;
  // Both sides run with the same environment; --passive makes idle OpenMP threads sleep
  // instead of spinning (what a loaded machine needs), for both alike.
  c.env = child_wait_env(a.passive);
  const Sides sides = check_sides(a, c.threads, c.env, c.script);
  const double load_before = load_average();
  const Rounds rounds = run_rounds(a, names, c);
  const Peaks peaks = best_peaks(rounds);
  const double peak = peaks.fp32;
  const json result = bench_result(a, names, sides, rounds, c.threads, load_before, peaks);
  if (a.json) {
    std::printf("%s\n", result.dump(2).c_str());
    return 0;
  }
  print_bench_header(a, result, sides, c.threads, load_before, peaks);
  print_bench_table(a, result, sides);
  if (a.gemm_shapes)
    for (const json& e : result["models"]) {
      const std::string n = e["model"].get<std::string>();
      const bool bf16_only = e["precision"] == "bf16";
      // each precision's products against its own GEMM's peak
      const double main_peak = bf16_only ? peaks.bf16 : peak;
      const char* main_name = bf16_only ? "bf16 GEMM peak" : "sgemm peak";
      print_gemm_shapes(n + (bf16_only ? " in bf16" : ""), e["qkv"]["gemm_shapes"],
                        rounds.qkv.at(n).back()["ms_per_step"], main_peak, main_name);
      print_parallel_regions(e["qkv"]["parallel_regions"]);
      if (e.contains("qkv_bf16")) {
        print_gemm_shapes(n + " in bf16", e["qkv_bf16"]["gemm_shapes"],
                          rounds.qkv_bf16.at(n).back()["ms_per_step"], peaks.bf16,
                          "bf16 GEMM peak");
        print_parallel_regions(e["qkv_bf16"]["parallel_regions"]);
      }
    }
  return 0;
}

}  // namespace

int cmd_bench(const BenchArgs& a) {
  QKV_CHECK(!a.gemm_shapes || !(a.attention_sweep || a.scaling || a.data_parallel), "bench",
            "--gemm-shapes times the models' training steps; it does not apply to ",
            a.attention_sweep ? "--attention-sweep"
            : a.scaling       ? "--scaling"
                              : "--data-parallel");
  if (a.attention_sweep || !a.sweep_method.empty()) return cmd_attention_sweep(a);
  set_num_threads(a.threads);
  const std::vector<std::string> names = model_names(a);
  QKV_CHECK(a.repeats >= 1, "bench", "--repeats must be >= 1, got ", a.repeats);
  QKV_CHECK(!(a.scaling && a.compare), "bench", "--scaling and --compare are separate benchmarks");
  if (a.scaling) return bench_scaling(a, names);
  if (a.child || a.data_parallel) return bench_in_process(a, names);
  return bench_in_children(a, names);
}

}  // namespace qkv::app
