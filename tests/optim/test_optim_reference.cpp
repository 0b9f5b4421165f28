// Parity with torch.optim (SGD, Adam, AdamW) over 20 steps: this test writes the initial
// parameters and every step's gradients, tests/optim/reference_optim.py replays them through
// torch.optim under /usr/bin/python3, and the parameters after each step are compared.
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
#include "core/random.hpp"
#include "optim/optimizers.hpp"
#include "optim/schedule.hpp"

namespace fs = std::filesystem;
using namespace qkv;
using namespace qkv::optim;
using nlohmann::json;

// A parameter: a leaf that requires grad.
static Var leaf(Tensor t) { return Var(std::move(t), true); }

namespace {

constexpr int kSteps = 20;

struct Case {
  std::string name;
  OptimConfig cfg;
  DType dt;
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

// Parameters of several shapes: one large enough for the parallel loop, biases and a 1-element
// gain (no weight decay under the default rule), a small matrix.
NamedParams make_params(DType dt, Generator& gen) {
  NamedParams ps;
  for (auto [name, shape] : std::vector<std::pair<std::string, Shape>>{
           {"enc.w", {128, 96}}, {"enc.b", {96}}, {"head.w", {7, 5}}, {"ln.g", {1}}})
    ps.emplace_back(name, leaf(randn(shape, gen, dt)));
  return ps;
}

// Step t's gradient for parameter i, or undefined: "head.w" gets none at steps 3 and 7.
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
  NamedParams ps = make_params(c.dt, gen);
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
  for (const auto& [name, p] : ps) {
    write_raw<T>(init, p.data());
    params.push_back({{"name", name}, {"shape", p.shape()}, {"weight_decay", wd.at(name)}});
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
                                 {"amsgrad", c.cfg.amsgrad}}},
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

}  // namespace

TEST_CASE("optimizers match torch.optim over 20 steps", "[optim][reference]") {
  const char* src = std::getenv("QKV_SOURCE_DIR");
  REQUIRE(src != nullptr);
  const fs::path script = fs::path(src) / "tests/optim/reference_optim.py";
  REQUIRE(fs::exists(script));
  const fs::path dir = fs::temp_directory_path() / ("qkv_optim_ref_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  set_num_threads(2);  // the large parameter takes the parallel path

  json manifest{{"cases", json::array()}};
  std::vector<Case> cs32 = cases(DType::f32), cs64 = cases(DType::f64);
  std::vector<std::vector<std::vector<float>>> ours32(cs32.size());
  std::vector<std::vector<std::vector<double>>> ours64(cs64.size());
  for (size_t i = 0; i < cs32.size(); ++i) run_case<float>(cs32[i], dir, manifest, ours32[i]);
  for (size_t i = 0; i < cs64.size(); ++i) run_case<double>(cs64[i], dir, manifest, ours64[i]);
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

  for (size_t i = 0; i < cs32.size(); ++i)
    report(cs32[i].name, compare(ours32[i], read_raw<float>(dir / (cs32[i].name + ".out.bin"))),
           1e-6);
  for (size_t i = 0; i < cs64.size(); ++i)
    report(cs64[i].name, compare(ours64[i], read_raw<double>(dir / (cs64[i].name + ".out.bin"))),
           1e-12);
}
