// Parity with torch.optim (SGD, Adam, AdamW) over 20 steps: this test writes the initial
// parameters and every step's gradients, tests/optim/reference_optim.py replays them through
// torch.optim under /usr/bin/python3, and the parameters after each step are compared. Muon,
// which torch 1.13 lacks, is replayed through modded-nanogpt's code written into the script.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "core/random.hpp"
#include "optim/muon.hpp"
#include "optim/optimizers.hpp"
#include "optim/schedule.hpp"
#include "support/common.hpp"

namespace fs = std::filesystem;
using namespace qkv;
using namespace qkv::optim;
using nlohmann::json;

// A parameter: a leaf that requires grad.
static Var leaf(Tensor t) { return Var(std::move(t), true); }

namespace {

constexpr int kSteps = 20;
// Muon's error against the reference, as a fraction of the displacement (update_errors). On
// the development machine: at most 2.1e-6, float32 rounding in another order (c (A A) for
// (c A) A) 2.5e-6; a Nesterov factor off by 0.1% gives 5e-5, an eps of 1e-4 for 1e-7 2e-4.
constexpr double kMuonTolerance = 1e-5;

// newton_schulz5 in bf16 against the same iteration in torch's bf16 ops: ||ours - torch||_F /
// ||torch||_F. On the development machine every value is bit-identical. A product summed in
// another order can round one of its entries to the neighbouring bf16 value (2^-8 of it), and
// the later iterations carry and spread that change: in the script, accumulating the products
// in float64 instead of float32 moved 24 matrices of these shapes by at most 1.7% (and their
// largest entries by up to 3%, so the entries are not compared one by one). A coefficient off
// by 0.5% (c = 2.0415) moves them by 3.3% to 5.2%.
constexpr double kNsBf16Tolerance = 2.5e-2;

struct ParamSpec {
  std::string name;
  Shape shape;
  bool muon = false;  // muon: the script gives it the orthogonalized update, else AdamW
};

// Parameters of several shapes: one large enough for the parallel loop, biases and a 1-element
// gain (no weight decay under the default rule), a small matrix.
const std::vector<ParamSpec> kParams{
    {"enc.w", {128, 96}}, {"enc.b", {96}}, {"head.w", {7, 5}}, {"ln.g", {1}}};

struct Case {
  std::string name;
  OptimConfig cfg;
  DType dt;
  std::vector<ParamSpec> params = kParams;
  double init_scale = 1.0;  // the initial parameters are init_scale * N(0, 1)
};

template <class T>
void write_raw(std::ofstream& f, const Tensor& t) {
  const std::vector<T> v = to_vector<T>(t.contiguous());
  f.write(reinterpret_cast<const char*>(v.data()),
          static_cast<std::streamsize>(v.size() * sizeof(T)));
}

template <class T>
std::vector<T> read_raw(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE(f.good());
  f.seekg(0, std::ios::end);
  const auto n = static_cast<size_t>(f.tellg()) / sizeof(T);
  f.seekg(0);
  std::vector<T> v(n);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(T)));
  return v;
}

NamedParams make_params(const Case& c, Generator& gen) {
  NamedParams ps;
  for (const ParamSpec& p : c.params)
    ps.emplace_back(p.name, leaf(mul(randn(p.shape, gen, c.dt), c.init_scale)));
  return ps;
}

// Step t's gradient for parameter i, or undefined: the third ("head.w") gets none at steps 3
// and 7.
// Scales vary over three decades so Adam's normalisation matters; some entries are exactly 0.
Tensor make_grad(const Var& p, size_t i, int t, DType dt, Generator& gen) {
  if (i == 2 && (t == 3 || t == 7)) return Tensor();
  const double scale = std::pow(10.0, (t % 5) - 2.0) * (1 + 0.3 * static_cast<double>(i));
  Tensor g = mul(randn(p.shape(), gen, dt), scale);
  return masked_fill(g, lt(rand(p.shape(), gen), 0.1), 0.0);
}

template <class T>
void run_case(const Case& c, const fs::path& dir, json& manifest,
              std::vector<std::vector<T>>& ours) {
  Generator gen(1234);
  NamedParams ps = make_params(c, gen);
  std::unique_ptr<Optimizer> opt = make_optimizer(c.cfg, ps);
  // The schedule drives the learning rate, so torch sees our set_lr values step by step.
  ScheduleConfig sc;
  // No warmup: a zero learning rate at step 0 would hide a wrong first update.
  sc.name = qkv::optim::ScheduleKind::cosine, sc.lr = c.cfg.lr, sc.warmup = 0,
  sc.total_steps = kSteps, sc.min_lr = c.cfg.lr / 10;

  std::ofstream init(dir / (c.name + ".init.bin"), std::ios::binary);
  json params = json::array();
  std::map<std::string, double> wd;
  const std::vector<std::string> names = opt->param_names();
  const std::vector<double> wds = opt->param_weight_decays();
  for (size_t i = 0; i < names.size(); ++i) wd[names[i]] = wds[i];
  for (size_t i = 0; i < ps.size(); ++i) {
    const auto& [name, p] = ps[i];
    write_raw<T>(init, p.data());
    params.push_back({{"name", name},
                      {"shape", p.shape()},
                      {"weight_decay", wd.at(name)},
                      {"muon", c.params[i].muon}});
  }
  std::ofstream grads(dir / (c.name + ".grads.bin"), std::ios::binary);
  json lrs = json::array(), present = json::array();
  for (int t = 0; t < kSteps; ++t) {
    lrs.push_back(apply_schedule(*opt, sc));
    json row = json::array();
    for (size_t i = 0; i < ps.size(); ++i) {
      Var& p = ps[i].second;
      p.grad() = make_grad(p, i, t, c.dt, gen);
      row.push_back(p.grad().defined());
      if (p.grad().defined()) write_raw<T>(grads, p.grad());
    }
    present.push_back(row);
    opt->step();
    opt->zero_grad();
    std::vector<T> after;
    for (const auto& np : ps) {
      const std::vector<T> v = to_vector<T>(np.second.data());
      after.insert(after.end(), v.begin(), v.end());
    }
    ours.push_back(after);
  }
  manifest["cases"].push_back({{"name", c.name},
                               {"dtype", dtype_name(c.dt)},
                               {"optimizer", std::string(qkv::name_of(c.cfg.name))},
                               {"hyper",
                                {{"lr", c.cfg.lr},
                                 {"momentum", c.cfg.momentum},
                                 {"dampening", c.cfg.dampening},
                                 {"nesterov", c.cfg.nesterov},
                                 {"beta1", c.cfg.beta1},
                                 {"beta2", c.cfg.beta2},
                                 {"eps", c.cfg.eps},
                                 {"amsgrad", c.cfg.amsgrad},
                                 {"muon_lr", c.cfg.muon_lr},
                                 {"muon_momentum", c.cfg.muon_momentum}}},
                               {"params", params},
                               {"lrs", lrs},
                               {"grad_present", present}});
}

// The tolerance is rtol = atol = tol: |ours - torch| <= tol * max(1, |torch|), relative for
// values of magnitude >= 1 and absolute below, where a parameter crossing zero would make a
// pure relative error meaningless. The pure relative error is reported as well.
struct Worst {
  double scaled = 0;  // max |ours - torch| / max(1, |torch|): what is checked
  double rel = 0;     // max |ours - torch| / |torch| over elements with |torch| >= 1e-3
  double abs = 0;     // max |ours - torch|
  int64_t differing = 0, total = 0;
};

template <class T>
Worst compare(const std::vector<std::vector<T>>& ours, const std::vector<T>& theirs) {
  Worst w;
  size_t k = 0, n = 0;
  for (const auto& step : ours) n += step.size();
  REQUIRE(theirs.size() == n);
  for (const auto& step : ours)
    for (T a : step) {
      const double b = theirs[k++], d = std::abs(static_cast<double>(a) - b);
      w.abs = std::max(w.abs, d);
      w.scaled = std::max(w.scaled, d / std::max(1.0, std::abs(b)));
      if (std::abs(b) >= 1e-3) w.rel = std::max(w.rel, d / std::abs(b));
      w.differing += d != 0;
      ++w.total;
    }
  return w;
}

void report(const std::string& name, const Worst& w, double tol) {
  std::printf(
      "optim reference %-28s max err %.3g (tol %.0e)  rel %.3g  abs %.3g  %lld of %lld values "
      "differ\n",
      name.c_str(), w.scaled, tol, w.rel, w.abs, static_cast<long long>(w.differing),
      static_cast<long long>(w.total));
  INFO(name << ": worst error " << w.scaled << " (relative " << w.rel << ", absolute " << w.abs
            << ")");
  CHECK(w.scaled <= tol);
}

std::vector<Case> cases(DType dt) {
  const std::string sfx = dt == DType::f32 ? "_f32" : "_f64";
  std::vector<Case> cs;
  auto push = [&](std::string n, OptimConfig c) { cs.push_back({n + sfx, c, dt}); };
  OptimConfig c;
  c.name = qkv::optim::OptimizerKind::sgd, c.lr = 0.05;
  push("sgd", c);
  c.momentum = 0.9, c.dampening = 0.1, c.weight_decay = 0.01;
  push("sgd_momentum_wd", c);
  c.dampening = 0, c.nesterov = true;
  push("sgd_nesterov_wd", c);
  c = OptimConfig{};
  c.name = qkv::optim::OptimizerKind::adam, c.lr = 1e-2;
  push("adam", c);
  c.weight_decay = 0.05, c.amsgrad = true, c.beta1 = 0.8, c.beta2 = 0.95, c.eps = 1e-6;
  push("adam_l2_amsgrad", c);
  c = OptimConfig{};
  c.name = qkv::optim::OptimizerKind::adamw, c.lr = 1e-2, c.weight_decay = 0.1;
  push("adamw", c);
  c.amsgrad = true, c.beta2 = 0.98, c.eps = 1e-9, c.weight_decay = 0.01, c.no_decay_1d = false;
  push("adamw_amsgrad_all_decay", c);
  return cs;
}

// Per parameter, its error against the displacement the reference has made so far, worst over
// the steps: max |ours - torch| / max |torch - init|. The error of the update itself, which an
// absolute tolerance on the parameters would hide behind their size.
struct UpdateError {
  double worst = 0;  // the largest ratio
  int step = 0;      // after which step (from 1)
};

template <class T>
std::vector<UpdateError> update_errors(const Case& c, const std::vector<std::vector<T>>& ours,
                                       const std::vector<T>& theirs, const std::vector<T>& init) {
  std::vector<UpdateError> out(c.params.size());
  const size_t per_step = init.size();
  REQUIRE(theirs.size() == ours.size() * per_step);
  for (size_t t = 0; t < ours.size(); ++t) {
    size_t off = 0;
    for (size_t i = 0; i < c.params.size(); ++i) {
      const size_t n = static_cast<size_t>(numel_of(c.params[i].shape));
      double err = 0, moved = 0;
      for (size_t k = off; k < off + n; ++k) {
        const double b = theirs[t * per_step + k];
        err = std::max(err, std::abs(static_cast<double>(ours[t][k]) - b));
        moved = std::max(moved, std::abs(b - static_cast<double>(init[k])));
      }
      if (moved > 0 && err / moved > out[i].worst) out[i] = {err / moved, static_cast<int>(t + 1)};
      off += n;
    }
  }
  return out;
}

// Where the reference runs: a fresh folder, removed afterwards.
struct RefDir {
  fs::path dir;
  explicit RefDir(const std::string& tag)
      : dir(fs::temp_directory_path() / (tag + "_" + std::to_string(getpid()))) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~RefDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// Writes the manifest and replays it through reference_optim.py; fails the test, with the
// script's output, if the script does not run.
void run_reference(const fs::path& dir, const json& manifest) {
  const char* src = std::getenv("QKV_SOURCE_DIR");
  REQUIRE(src != nullptr);
  const fs::path script = fs::path(src) / "tests/optim/reference_optim.py";
  REQUIRE(fs::exists(script));
  std::ofstream(dir / "manifest.json") << manifest.dump();
  const fs::path log = dir / "python.log";
  const std::string cmd = "/usr/bin/python3 '" + script.string() + "' '" + dir.string() + "' > '" +
                          log.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::stringstream out;
  out << std::ifstream(log).rdbuf();
  const int status = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  INFO("command: " << cmd << "\nexit status " << status << "\noutput:\n" << out.str());
  if (rc != 0)
    FAIL(
        "the PyTorch reference failed to run; /usr/bin/python3 needs python3-torch (make install)");
}

}  // namespace

TEST_CASE("optimizers match torch.optim over 20 steps", "[optim][reference]") {
  RefDir ref("qkv_optim_ref");
  const fs::path& dir = ref.dir;
  set_num_threads(2);  // the large parameter takes the parallel path

  json manifest{{"cases", json::array()}};
  std::vector<Case> cs32 = cases(DType::f32), cs64 = cases(DType::f64);
  std::vector<std::vector<std::vector<float>>> ours32(cs32.size());
  std::vector<std::vector<std::vector<double>>> ours64(cs64.size());
  for (size_t i = 0; i < cs32.size(); ++i) run_case<float>(cs32[i], dir, manifest, ours32[i]);
  for (size_t i = 0; i < cs64.size(); ++i) run_case<double>(cs64[i], dir, manifest, ours64[i]);
  run_reference(dir, manifest);

  for (size_t i = 0; i < cs32.size(); ++i)
    report(cs32[i].name, compare(ours32[i], read_raw<float>(dir / (cs32[i].name + ".out.bin"))),
           1e-6);
  for (size_t i = 0; i < cs64.size(); ++i)
    report(cs64[i].name, compare(ours64[i], read_raw<double>(dir / (cs64[i].name + ".out.bin"))),
           1e-12);
}

TEST_CASE("Muon matches modded-nanogpt's update written in torch ops over 20 steps",
          "[optim][reference]") {
  // Four matrices the rule routes to Muon: square, tall, wide (it misses its gradient on two
  // steps), and one past 64 in both dimensions; a bias and an embedding it routes to AdamW.
  // GPT-sized initial values (0.02 N(0, 1)) keep the parameters' own rounding below the
  // updates' so that the comparison sees the update.
  Case c{"muon_f32",
         OptimConfig{},
         DType::f32,
         {{"blocks.layers.0.self_attn.w_q.weight", {48, 48}, true},
          {"blocks.layers.0.ffn.linear1.weight", {96, 24}, true},
          {"blocks.layers.1.self_attn.w_o.weight", {24, 80}, true},
          {"blocks.layers.1.ffn.linear2.weight", {72, 136}, true},
          {"blocks.layers.0.ffn.linear1.bias", {96}, false},
          {"embed.weight", {50, 48}, false}},
         0.02};
  c.cfg.name = OptimizerKind::muon, c.cfg.lr = 1e-2, c.cfg.weight_decay = 0.1;
  c.cfg.muon_lr = 0.05, c.cfg.muon_momentum = 0.9;
  for (const ParamSpec& p : c.params) {
    INFO(p.name);
    CHECK(is_hidden_matrix(p.name, leaf(zeros(p.shape))) == p.muon);
  }
  RefDir ref("qkv_muon_ref");
  set_num_threads(2);  // matrices shared out between the threads
  json manifest{{"cases", json::array()}};
  std::vector<std::vector<float>> ours;
  run_case<float>(c, ref.dir, manifest, ours);
  run_reference(ref.dir, manifest);

  const std::vector<UpdateError> es =
      update_errors(c, ours, read_raw<float>(ref.dir / "muon_f32.out.bin"),
                    read_raw<float>(ref.dir / "muon_f32.init.bin"));
  for (size_t i = 0; i < es.size(); ++i) {
    const ParamSpec& p = c.params[i];
    std::printf(
        "optim reference muon_f32 %-38s %-9s %-6s max err %.3g of the displacement (tol "
        "%.0e), after step %d\n",
        p.name.c_str(), shape_str(p.shape).c_str(), p.muon ? "muon" : "adamw", es[i].worst,
        kMuonTolerance, es[i].step);
    INFO(p.name << ": worst error " << es[i].worst << " of the displacement, after step "
                << es[i].step);
    CHECK(es[i].worst <= kMuonTolerance);
  }
}

TEST_CASE("newton_schulz5 in bf16 matches modded-nanogpt's bfloat16 quintic in torch",
          "[optim][reference]") {
  SKIP_WITHOUT_BF16();
  // Wide, tall (transposed in and out) and square shapes past oneDNN's 16- and 64-wide tiles,
  // and one below them.
  const std::vector<Shape> shapes{{48, 200}, {200, 48}, {130, 130}, {7, 12}};
  RefDir ref("qkv_ns_bf16_ref");
  Generator gen(4321);
  json manifest{{"cases", json::array()}, {"newton_schulz", json::array()}};
  std::vector<std::string> names;
  std::vector<Tensor> ours;
  for (const Shape& shape : shapes) {
    names.push_back("ns_" + std::to_string(shape[0]) + "x" + std::to_string(shape[1]));
    const Tensor g = randn(shape, gen);
    {
      std::ofstream f(ref.dir / (names.back() + ".in.bin"), std::ios::binary);
      write_raw<float>(f, g);
    }
    manifest["newton_schulz"].push_back({{"name", names.back()}, {"shape", shape}});
    ours.push_back(newton_schulz5(g, Precision::bf16));
  }
  run_reference(ref.dir, manifest);
  for (size_t i = 0; i < names.size(); ++i) {
    const std::vector<float> theirs = read_raw<float>(ref.dir / (names[i] + ".out.bin"));
    const std::vector<float> v = to_vector<float>(ours[i]);
    REQUIRE(v.size() == theirs.size());
    double diff2 = 0, norm2 = 0, worst = 0;
    int64_t differing = 0;
    for (size_t k = 0; k < v.size(); ++k) {
      const double d = static_cast<double>(v[k]) - theirs[k];
      diff2 += d * d;
      norm2 += static_cast<double>(theirs[k]) * theirs[k];
      worst = std::max(worst, std::abs(d));
      differing += v[k] != theirs[k];
    }
    const double err = std::sqrt(diff2 / norm2);
    std::printf(
        "optim reference %-12s bf16 err %.3g of the norm (tol %.1e), max abs %.3g, %lld of %zu "
        "values differ\n",
        names[i].c_str(), err, kNsBf16Tolerance, worst, static_cast<long long>(differing),
        v.size());
    INFO(names[i] << ": error " << err << " of the norm, largest " << worst);
    CHECK(err <= kNsBf16Tolerance);
  }
}
