// qkv bench [--model NAME ...] [--threads N] [--json] [--compare] [--repeats R]
//
// Times full training steps (forward, backward, Adam) of fixed models after warm-up. Each
// model runs in its own child process (this binary with --child), so its peak resident
// memory is its own; with --compare the PyTorch reference (apps/bench_reference.py, run by
// /usr/bin/python3) runs the same model in its own process right after, and the two
// alternate for --repeats rounds so machine load hits both alike. Reported per side: the
// median over rounds of each process's median step time.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cblas.h>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "apps/bench_util.hpp"
#include "apps/commands.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "nn/seq2seq.hpp"
#include "optim/optimizers.hpp"

#ifndef QKV_SOURCE_DIR
#define QKV_SOURCE_DIR "."
#endif

namespace qkv::app {
namespace {

using namespace bench;

using nlohmann::json;

struct BenchModel {
  std::string name;
  bool seq2seq;  // false: one MultiHeadAttention layer
  int64_t d_model, heads, d_ff, enc_layers, dec_layers, vocab, length, batch;
};

const std::vector<BenchModel>& models() {
  static const std::vector<BenchModel> m = {
      {"tiny", true, 64, 4, 256, 2, 2, 16, 32, 64},
      {"small", true, 128, 4, 512, 2, 2, 16, 32, 64},
      {"annotated", true, 512, 8, 2048, 2, 2, 11, 10, 80},
      {"attention-4096", false, 512, 8, 0, 0, 0, 0, 4096, 1},
  };
  return m;
}

const BenchModel& find_model(const std::string& name) {
  for (const BenchModel& m : models())
    if (m.name == name) return m;
  std::string known;
  for (const BenchModel& m : models()) known += (known.empty() ? "" : ", ") + m.name;
  throw Error(cat("bench: unknown model '", name, "' (known: ", known, ")"));
}

// Matmul FLOPs of one training step: backward costs twice the forward (dX and dW products).
double train_flops(const BenchModel& m) {
  const double B = m.batch, L = m.length, d = m.d_model, f = m.d_ff, V = m.vocab;
  const double attn_self = 4 * 2 * B * L * d * d + 2 * 2 * B * L * L * d;
  if (!m.seq2seq) return 3 * attn_self;
  const double ffn = 2 * 2 * B * L * d * f;
  const double fwd = m.enc_layers * (attn_self + ffn) +
                     m.dec_layers * (2 * attn_self + ffn) + 2 * B * L * d * V;
  return 3 * fwd;
}

double tokens_per_step(const BenchModel& m) {
  return m.seq2seq ? 2.0 * m.batch * m.length : double(m.batch) * m.length;
}

// The child: one model, in this process, timed; one JSON object on stdout.
json run_one(const BenchModel& m, double min_seconds) {
  const double base_mb = proc_status_mb("VmRSS");
  Generator gen(1);
  std::function<void()> step;
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> opt;
  Tensor src, tgt_in, tgt_out, valid, x_data, g_out;
  optim::OptimConfig oc;
  oc.name = "adam";
  oc.lr = 1e-4;
  if (m.seq2seq) {
    nn::ModelConfig c;
    c.src_vocab = c.tgt_vocab = m.vocab;
    c.d_model = m.d_model;
    c.heads = m.heads;
    c.d_ff = m.d_ff;
    c.encoder_layers = m.enc_layers;
    c.decoder_layers = m.dec_layers;
    c.dropout = 0;
    c.final_norm = true;  // as nn.Transformer, which ends both stacks with a LayerNorm
    auto s2s = std::make_shared<nn::Seq2Seq>(c, gen);
    model = s2s;
    src = randint({m.batch, m.length}, 0, m.vocab, gen);
    tgt_in = randint({m.batch, m.length}, 0, m.vocab, gen);
    tgt_out = randint({m.batch * m.length}, 0, m.vocab, gen);
    valid = ones({m.batch, m.length}, DType::b8);
    opt = optim::make_optimizer(oc, model->named_parameters());
    step = [&, s2s] {
      opt->zero_grad();
      const ag::Var logits = s2s->forward(src, tgt_in, valid, valid);
      const ag::Var loss =
          ag::cross_entropy(ag::reshape(logits, {m.batch * m.length, m.vocab}), tgt_out);
      loss.backward();
      opt->step();
    };
  } else {
    auto mha = std::make_shared<nn::MultiHeadAttention>(m.d_model, m.heads, gen);
    model = mha;
    x_data = randn({m.batch, m.length, m.d_model}, gen);
    g_out = randn({m.batch, m.length, m.d_model}, gen);
    step = [&, mha] {
      mha->zero_grad();
      const ag::Var x(x_data, true);
      const ag::Var y = mha->forward(x, x, x);
      y.backward(g_out);
    };
  }
  for (int i = 0; i < 3; ++i) step();  // warm-up: fills the allocator's cache
  const AllocatorStats a0 = allocator_stats();
  const std::vector<double> ms = time_steps(step, 0, 5, min_seconds);
  const AllocatorStats a1 = allocator_stats();
  json j;
  j["model"] = m.name;
  j["framework"] = "qkv";
  j["threads"] = get_num_threads();
  j["ms_per_step"] = median(ms);
  j["steps"] = ms.size();
  j["peak_rss_mb"] = proc_status_mb("VmHWM") - base_mb;
  j["peak_tensor_mb"] = double(a1.peak_live_bytes) / (1 << 20);
  // Blocks taken from the system during the timed steps: 0 once the cache is warm.
  j["system_allocs_per_step"] = double(a1.system_allocs - a0.system_allocs) / ms.size();
  return j;
}

// Best sgemm GFLOP/s on 1024^3 with this many threads: the roof for "% of peak".
double sgemm_peak_gflops() {
  const int n = 1024;
  std::vector<float> a(n * n, 1.0f), b(n * n, 0.5f), c(n * n);
  double best = 0;
  for (int i = 0; i < 8; ++i) {
    const auto t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  return best;
}

}  // namespace

int cmd_bench(const BenchArgs& a) {
  if (a.attention_sweep || !a.sweep_method.empty()) return cmd_attention_sweep(a);
  set_num_threads(a.threads);
  std::vector<std::string> names = a.models;
  if (names.empty())
    for (const BenchModel& m : models()) names.push_back(m.name);
  for (const std::string& n : names) (void)find_model(n);
  QKV_CHECK(a.repeats >= 1, "bench", "--repeats must be >= 1, got ", a.repeats);

  if (a.child) {
    for (const std::string& n : names)
      std::printf("%s\n", run_one(find_model(n), a.min_seconds).dump().c_str());
    return 0;
  }

  const int threads = get_num_threads();
  const std::string self = shell_quote(self_exe());
  const std::string script =
      a.reference.empty() ? std::string(QKV_SOURCE_DIR) + "/apps/bench_reference.py" : a.reference;
  std::map<std::string, std::vector<json>> qkv_runs, torch_runs;
  std::vector<double> peaks;
  const double load_before = load_average();
  for (int r = 0; r < a.repeats; ++r) {
    peaks.push_back(sgemm_peak_gflops());
    for (const std::string& n : names) {
      // Both sides run with the same environment; --passive makes idle OpenMP threads sleep
      // instead of spinning (what a loaded machine needs), for both alike.
      const std::string env = a.passive ? "OMP_WAIT_POLICY=passive " : "";
      const std::string common = " --model " + n + " --threads " + std::to_string(threads) +
                                 " --min-seconds " + std::to_string(a.min_seconds);
      qkv_runs[n].push_back(run_child(env + self + " bench --child" + common));
      if (a.compare)
        torch_runs[n].push_back(run_child(env + "/usr/bin/python3 " + shell_quote(script) + common));
      if (!a.json) {
        std::fprintf(stderr, "round %d/%d %s: qkv %.2f ms", r + 1, a.repeats, n.c_str(),
                     qkv_runs[n].back()["ms_per_step"].get<double>());
        if (a.compare)
          std::fprintf(stderr, ", torch %.2f ms", torch_runs[n].back()["ms_per_step"].get<double>());
        std::fprintf(stderr, "\n");
      }
    }
  }
  // Load only ever lowers a timing, so the best round is the closest to the machine's peak.
  const double peak = *std::max_element(peaks.begin(), peaks.end());

  auto summarize = [&](const std::vector<json>& runs, const BenchModel& m) {
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
    s["peak_rss_mb"] = *std::max_element(rss.begin(), rss.end());
    s["runs_ms"] = ms;
    return s;
  };

  json result;
  result["machine"] = {{"cpu", cpu_model()},
                       {"cores", omp_get_num_procs()},
                       {"load_average_before", load_before},
                       {"load_average_after", load_average()}};
  result["threads"] = threads;
  result["omp_wait_policy"] = a.passive ? "passive" : "default";
  result["repeats"] = a.repeats;
  result["sgemm_peak_gflops"] = peak;
  result["models"] = json::array();
  for (const std::string& n : names) {
    const BenchModel& m = find_model(n);
    json e;
    e["model"] = n;
    e["gflop_per_step"] = train_flops(m) / 1e9;
    e["qkv"] = summarize(qkv_runs[n], m);
    e["qkv"]["peak_tensor_mb"] = qkv_runs[n].back()["peak_tensor_mb"];
    e["qkv"]["system_allocs_per_step"] = qkv_runs[n].back()["system_allocs_per_step"];
    if (a.compare) {
      e["torch"] = summarize(torch_runs[n], m);
      e["ratio"] = e["qkv"]["ms_per_step"].get<double>() / e["torch"]["ms_per_step"].get<double>();
    }
    result["models"].push_back(e);
  }
  if (a.json) {
    std::printf("%s\n", result.dump(2).c_str());
    return 0;
  }
  std::printf("%s, %d cores, %d threads%s; sgemm peak %.1f GFLOP/s; load %.2f -> %.2f; "
              "median of %d rounds\n\n",
              cpu_model().c_str(), omp_get_num_procs(), threads,
              a.passive ? " (OMP_WAIT_POLICY=passive)" : "", peak, load_before, load_average(),
              a.repeats);
  if (a.compare) {
    std::printf("| model | qkv ms/step | torch ms/step | qkv/torch | qkv tokens/s | qkv GFLOP/s | "
                "qkv %% sgemm peak | torch %% sgemm peak | qkv peak MB | torch peak MB |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  } else {
    std::printf("| model | ms/step | tokens/s | GFLOP/s | %% sgemm peak | peak MB |\n");
    std::printf("|---|---:|---:|---:|---:|---:|\n");
  }
  for (const json& e : result["models"]) {
    const json& q = e["qkv"];
    if (a.compare) {
      const json& t = e["torch"];
      std::printf("| %s | %.2f | %.2f | %.2f | %.0f | %.1f | %.0f%% | %.0f%% | %.0f | %.0f |\n",
                  e["model"].get<std::string>().c_str(), q["ms_per_step"].get<double>(),
                  t["ms_per_step"].get<double>(), e["ratio"].get<double>(),
                  q["tokens_per_s"].get<double>(), q["gflops"].get<double>(),
                  100 * q["fraction_of_sgemm_peak"].get<double>(),
                  100 * t["fraction_of_sgemm_peak"].get<double>(), q["peak_rss_mb"].get<double>(),
                  t["peak_rss_mb"].get<double>());
    } else {
      std::printf("| %s | %.2f | %.0f | %.1f | %.0f%% | %.0f |\n",
                  e["model"].get<std::string>().c_str(), q["ms_per_step"].get<double>(),
                  q["tokens_per_s"].get<double>(), q["gflops"].get<double>(),
                  100 * q["fraction_of_sgemm_peak"].get<double>(), q["peak_rss_mb"].get<double>());
    }
  }
  return 0;
}

}  // namespace qkv::app
