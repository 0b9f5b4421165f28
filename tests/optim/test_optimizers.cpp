// Optimizer updates against hand-worked steps, state save/load and resume, the no-decay
// rule, determinism across thread counts, and misuse.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/parallel.hpp"
#include "core/random.hpp"
#include "optim/optimizers.hpp"
#include "optim/schedule.hpp"

using namespace qkv;
using namespace qkv::optim;
using Catch::Matchers::Contains;

// A parameter: a leaf that requires grad.
static Var leaf(Tensor t) { return Var(std::move(t), true); }

namespace {

// A deterministic stream of gradients: step t's gradient for parameter i; parameter 1 gets
// none on steps 2 and 13 (skipped: its state and step count stay as they are).
Tensor grad_at(const Var& p, size_t i, int t) {
  if (i == 1 && (t == 2 || t == 13)) return Tensor();
  Generator g(1000 + 31 * static_cast<uint64_t>(t) + i);
  return mul(randn(p.shape(), g, p.dtype()), 0.5 + 0.1 * t);
}

NamedParams fresh_params(DType dt = DType::f32) {
  Generator g(5);
  return {{"layer.w", leaf(randn({40, 30}, g, dt))},
          {"layer.b", leaf(randn({30}, g, dt))},
          {"emb", leaf(randn({11, 6}, g, dt))}};
}

void run(Optimizer& opt, NamedParams& ps, int from, int to, const ScheduleConfig& sc) {
  for (int t = from; t < to; ++t) {
    apply_schedule(opt, sc);
    for (size_t i = 0; i < ps.size(); ++i) ps[i].second.grad() = grad_at(ps[i].second, i, t);
    opt.step();
    opt.zero_grad();
  }
}

// What the app does: copy every tensor out (as if written to safetensors) and back in.
OptimState copied(const OptimState& s) {
  OptimState c = s;
  for (auto& nt : c.tensors) nt.second = nt.second.clone();
  return c;
}

OptimConfig config(const std::string& name) {
  OptimConfig c;
  c.name = qkv::parse_name<OptimizerKind>(name, "optim.name"), c.lr = 0.01, c.weight_decay = 0.05;
  if (name == "sgd") c.momentum = 0.9, c.nesterov = true;
  if (name == "adamw") c.amsgrad = true;
  return c;
}

}  // namespace

TEST_CASE("SGD: plain, momentum and weight decay by hand", "[optim]") {
  Var p = leaf(tensor({1.0, 2.0}, {2}, DType::f64));
  SGD plain(NamedParams{{"p", p}}, SGDOptions{0.1});
  p.grad() = tensor({0.5, -1.0}, {2}, DType::f64);
  plain.step();
  CHECK(p.data().at({0}) == Approx(0.95).epsilon(1e-15));
  CHECK(p.data().at({1}) == Approx(2.1).epsilon(1e-15));

  // momentum 0.9, dampening 0.5, wd 0.1: d1 = g1 + 0.1 p0 = 1.1, buf = 1.1, p1 = 1 - 0.11 = 0.89;
  // d2 = 1 + 0.089 = 1.089, buf = 0.99 + 0.5445 = 1.5345, p2 = 0.89 - 0.15345 = 0.73655.
  Var q = leaf(tensor({1.0}, {1}, DType::f64));
  SGD mom(NamedParams{{"q", q}}, SGDOptions{0.1, 0.9, 0.5, 0.1});
  q.grad() = tensor({1.0}, {1}, DType::f64);
  mom.step();
  CHECK(q.data().item() == Approx(0.89).epsilon(1e-15));
  mom.step();
  CHECK(q.data().item() == Approx(0.73655).epsilon(1e-14));

  // Nesterov: d1 = 1, buf = 1, step = d + 0.9 buf = 1.9; d2 = 1, buf = 1.9, step = 2.71.
  Var r = leaf(tensor({0.0}, {1}, DType::f64));
  SGD nes(NamedParams{{"r", r}}, SGDOptions{0.1, 0.9, 0.0, 0.0, true});
  r.grad() = tensor({1.0}, {1}, DType::f64);
  nes.step();
  CHECK(r.data().item() == Approx(-0.19).epsilon(1e-15));
  nes.step();
  CHECK(r.data().item() == Approx(-0.19 - 0.271).epsilon(1e-14));
}

TEST_CASE("Adam and AdamW: the first steps by hand", "[optim]") {
  // Step 1: m_hat = g and v_hat = g^2, so the update is lr * g / (|g| + eps).
  const double lr = 0.1, eps = 1e-8, wd = 0.5;
  Var p = leaf(tensor({1.0, -2.0}, {2}, DType::f64));
  Adam adam(NamedParams{{"p", p}}, AdamOptions{lr, 0.9, 0.999, eps, 0.0});
  p.grad() = tensor({0.3, 4.0}, {2}, DType::f64);
  adam.step();
  CHECK(p.data().at({0}) == Approx(1.0 - lr * 0.3 / (0.3 + eps)).epsilon(1e-15));
  CHECK(p.data().at({1}) == Approx(-2.0 - lr * 4.0 / (4.0 + eps)).epsilon(1e-15));
  // Step 2 with g2: m = 0.9*0.1*g1 + 0.1*g2 ... checked for element 0 in closed form.
  p.grad() = tensor({-0.6, 4.0}, {2}, DType::f64);
  adam.step();
  {
    const double m = 0.9 * (0.1 * 0.3) + 0.1 * -0.6;
    const double v = 0.999 * (0.001 * 0.09) + 0.001 * 0.36;
    const double p1 = 1.0 - lr * 0.3 / (0.3 + eps);
    const double expect =
        p1 - lr / (1 - 0.81) * m / (std::sqrt(v) / std::sqrt(1 - 0.999 * 0.999) + eps);
    CHECK(p.data().at({0}) == Approx(expect).epsilon(1e-14));
  }

  // Adam's L2: g' = g + wd p; AdamW: p *= 1 - lr wd first. One step each from p = 1, g = 0.2.
  Var a = leaf(tensor({1.0}, {1}, DType::f64)), w = leaf(tensor({1.0}, {1}, DType::f64));
  Adam l2(NamedParams{{"a", a}}, AdamOptions{lr, 0.9, 0.999, eps, wd});
  AdamW dec(NamedParams{{"w", w}}, AdamOptions{lr, 0.9, 0.999, eps, wd});
  a.grad() = tensor({0.2}, {1}, DType::f64);
  w.grad() = tensor({0.2}, {1}, DType::f64);
  l2.step();
  dec.step();
  CHECK(a.data().item() == Approx(1.0 - lr * 0.7 / (0.7 + eps)).epsilon(1e-15));
  CHECK(w.data().item() == Approx(1.0 * (1 - lr * wd) - lr * 0.2 / (0.2 + eps)).epsilon(1e-15));
}

TEST_CASE("AMSGrad keeps the running maximum of v", "[optim]") {
  // A large gradient then small ones: with amsgrad the denominator stays at the peak, so
  // the steps are smaller than plain Adam's.
  Var p = leaf(tensor({0.0}, {1}, DType::f64)), q = leaf(tensor({0.0}, {1}, DType::f64));
  Adam ams(NamedParams{{"p", p}}, AdamOptions{0.1, 0.0, 0.5, 0.0, 0.0, true});
  Adam plain(NamedParams{{"q", q}}, AdamOptions{0.1, 0.0, 0.5, 0.0, 0.0, false});
  for (double g : {10.0, 1.0}) {
    p.grad() = tensor({g}, {1}, DType::f64);
    q.grad() = tensor({g}, {1}, DType::f64);
    ams.step();
    plain.step();
  }
  // beta1 = 0: m = g. Step 2: v = 0.5*50 + 0.5*1 = 25.5, vmax = max(50, 25.5) = 50,
  // bc2 = 0.75: plain steps 0.1 * 1 / sqrt(25.5 / 0.75), amsgrad 0.1 * 1 / sqrt(50 / 0.75).
  CHECK(q.data().item() == Approx(-0.1 - 0.1 / std::sqrt(25.5 / 0.75)).epsilon(1e-14));
  CHECK(p.data().item() == Approx(-0.1 - 0.1 / std::sqrt(50 / 0.75)).epsilon(1e-14));
  const OptimState s = ams.state();
  REQUIRE(s.tensors.size() == 3);
  CHECK(s.tensors[2].first == "p.max_exp_avg_sq");
  CHECK(s.tensors[2].second.item() == Approx(50.0).epsilon(1e-15));
}

TEST_CASE("parameters without a gradient are skipped, and zero_grad drops gradients", "[optim]") {
  NamedParams ps = fresh_params();
  Adam opt(ps, AdamOptions{});
  const Tensor b0 = ps[1].second.data().clone();
  ps[0].second.grad() = ones({40, 30});
  opt.step();
  CHECK(max_abs_diff(ps[1].second.data(), b0) == 0.0);
  const OptimState s = opt.state();
  CHECK(s.scalars.at("step") == 1);
  CHECK(s.scalars.at("layer.w.step") == 1);
  CHECK(s.scalars.at("layer.b.step") == 0);
  CHECK(s.tensors.size() == 2);  // layer.w's exp_avg, exp_avg_sq only
  opt.zero_grad();
  for (const auto& np : ps) CHECK(!np.second.grad().defined());
}

TEST_CASE("save after 10 steps, load into a fresh optimizer, 10 more = 20 uninterrupted",
          "[optim]") {
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    for (DType dt : {DType::f32, DType::f64}) {
      INFO(name << " " << dtype_name(dt));
      ScheduleConfig sc;
      sc.name = qkv::optim::ScheduleKind::cosine, sc.lr = 0.01, sc.warmup = 3, sc.total_steps = 20,
      sc.min_lr = 0.001;
      NamedParams a = fresh_params(dt);
      auto straight = make_optimizer(config(name), a);
      run(*straight, a, 0, 20, sc);

      NamedParams b = fresh_params(dt);
      auto first = make_optimizer(config(name), b);
      run(*first, b, 0, 10, sc);
      const OptimState saved = copied(first->state());
      // A fresh process: parameters restored from the checkpoint, a new optimizer.
      NamedParams c;
      for (const auto& [n, p] : b) c.emplace_back(n, leaf(p.data().clone()));
      auto resumed = make_optimizer(config(name), c);
      CHECK(resumed->steps() == 0);
      resumed->load_state(saved);
      CHECK(resumed->steps() == 10);
      run(*resumed, c, 10, 20, sc);
      for (size_t i = 0; i < a.size(); ++i)
        CHECK(max_abs_diff(a[i].second.data(), c[i].second.data()) == 0.0);
      // load_state copied: the saved tensors are not the optimizer's buffers.
      CHECK(max_abs_diff(saved.tensors[0].second, first->state().tensors[0].second) == 0.0);
    }
  }
}

TEST_CASE("load_state rejects mismatched state, naming it, and leaves the optimizer as it was",
          "[optim]") {
  NamedParams ps = fresh_params();
  auto opt = make_optimizer(config("adam"), ps);
  run(*opt, ps, 0, 3, ScheduleConfig{});
  const OptimState good = copied(opt->state());

  auto fresh = [&] { return make_optimizer(config("adam"), ps); };
  {
    OptimState s = good;
    s.optimizer = "sgd";
    CHECK_THROWS_WITH(fresh()->load_state(s), Contains("'sgd'") && Contains("'adam'"));
  }
  {
    OptimState s = good;
    for (auto& [n, t] : s.tensors)
      if (n == "layer.b.exp_avg") t = zeros({31});
    CHECK_THROWS_WITH(fresh()->load_state(s),
                      Contains("layer.b.exp_avg") && Contains("(31)") && Contains("(30)"));
  }
  {
    OptimState s = good;
    s.tensors.emplace_back("decoder.w.exp_avg", zeros({2}));
    CHECK_THROWS_WITH(fresh()->load_state(s), Contains("decoder.w.exp_avg"));
  }
  {
    OptimState s = good;
    s.tensors.emplace_back("emb.momentum_buffer", zeros({11, 6}));
    CHECK_THROWS_WITH(fresh()->load_state(s), Contains("momentum_buffer"));
  }
  {
    OptimState s = good;
    s.tensors.erase(s.tensors.begin());
    CHECK_THROWS_WITH(fresh()->load_state(s),
                      Contains("missing") && Contains(good.tensors[0].first));
  }
  {
    OptimState s = good;
    s.scalars.erase("emb.step");
    CHECK_THROWS_WITH(fresh()->load_state(s), Contains("emb.step"));
    s = good;
    s.scalars["step"] = 2.5;
    CHECK_THROWS_WITH(fresh()->load_state(s), Contains("'step'"));
  }
  // A failed load changes nothing.
  {
    OptimState s = good;
    s.scalars.erase("emb.step");
    const OptimState before = copied(opt->state());
    CHECK_THROWS_AS(opt->load_state(s), Error);
    const OptimState after = opt->state();
    CHECK(after.scalars == before.scalars);
    REQUIRE(after.tensors.size() == before.tensors.size());
    for (size_t i = 0; i < after.tensors.size(); ++i)
      CHECK(max_abs_diff(after.tensors[i].second, before.tensors[i].second) == 0.0);
  }
  // A state written from float64 loads into float32 parameters (converted).
  {
    OptimState s = good;
    for (auto& nt : s.tensors) nt.second = nt.second.to(DType::f64);
    auto o = fresh();
    o->load_state(s);
    CHECK(o->state().tensors[0].second.dtype() == DType::f32);
  }
}

TEST_CASE("the no-decay rule: 1-D parameters and name patterns skip weight decay", "[optim]") {
  NamedParams ps = fresh_params();
  OptimConfig c = config("adamw");
  auto opt = make_optimizer(c, ps);
  const auto names = opt->param_names();
  const auto wds = opt->param_weight_decays();
  REQUIRE(names == std::vector<std::string>{"layer.w", "emb", "layer.b"});
  CHECK(wds == std::vector<double>{0.05, 0.05, 0.0});

  c.no_decay = {"emb"};
  CHECK(make_optimizer(c, ps)->param_weight_decays() == std::vector<double>{0.05, 0.0, 0.0});
  c.no_decay_1d = false, c.no_decay = {};
  CHECK(make_optimizer(c, ps)->param_weight_decays() == std::vector<double>{0.05, 0.05, 0.05});

  // Explicit groups: a group's weight decay overrides the optimizer's.
  AdamW g({ParamGroup{{ps[0]}, std::nullopt}, ParamGroup{{ps[1], ps[2]}, 0.3}}, AdamOptions{});
  CHECK(g.param_weight_decays() == std::vector<double>{0.0, 0.3, 0.3});
}

TEST_CASE("updates are bit-identical at 1 and 2 threads and allocate nothing after the first step",
          "[optim]") {
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    INFO(name);
    std::vector<float> result[2];
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      Generator g(9);
      NamedParams ps{{"big", leaf(randn({300, 400}, g))}};
      auto opt = make_optimizer(config(name), ps);
      for (int t = 0; t < 3; ++t) {
        ps[0].second.grad() = grad_at(ps[0].second, 0, t);
        const AllocatorStats before = allocator_stats();
        opt->step();
        const AllocatorStats after = allocator_stats();
        if (t > 0) {
          CHECK(after.system_allocs == before.system_allocs);
          CHECK(after.cache_hits == before.cache_hits);
        }
      }
      result[threads - 1] = to_vector<float>(ps[0].second.data());
    }
    set_num_threads(0);
    CHECK(result[0] == result[1]);
  }
}

TEST_CASE("one step over many parameters, split across threads, equals each one updated alone",
          "[optim]") {
  // step() runs one parallel region over all parameters' elements: the thread boundary falls
  // inside a tensor, small tensors share a thread's range, one has no gradient, dtypes mix.
  const std::vector<std::pair<Shape, DType>> specs{{{7}, DType::f32},
                                                   {{200, 230}, DType::f32},
                                                   {{3}, DType::f64},
                                                   {{90, 300}, DType::f64},
                                                   {{5, 5}, DType::f32}};
  auto make = [&] {
    Generator g(21);
    NamedParams ps;
    const char* names[] = {"a", "b", "c", "d", "e"};
    for (size_t i = 0; i < specs.size(); ++i)
      ps.push_back({names[i], leaf(randn(specs[i].first, g, specs[i].second))});
    return ps;
  };
  auto grads = [](NamedParams& ps, int t) {
    for (size_t i = 0; i < ps.size(); ++i)
      ps[i].second.grad() = (i == 3 && t == 1) ? Tensor() : grad_at(ps[i].second, i, t);
  };
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    INFO(name);
    set_num_threads(2);
    NamedParams all = make();
    auto opt = make_optimizer(config(name), all);
    for (int t = 0; t < 3; ++t) grads(all, t), opt->step();
    set_num_threads(1);
    NamedParams alone = make();
    std::vector<std::unique_ptr<Optimizer>> opts;
    for (auto& p : alone) opts.push_back(make_optimizer(config(name), NamedParams{p}));
    for (int t = 0; t < 3; ++t) {
      grads(alone, t);
      for (auto& o : opts) o->step();
    }
    set_num_threads(0);
    for (size_t i = 0; i < all.size(); ++i) {
      INFO(all[i].first);
      CHECK(to_vector<double>(all[i].second.data().to(DType::f64)) ==
            to_vector<double>(alone[i].second.data().to(DType::f64)));
    }
  }
}

TEST_CASE("optimizers reject misuse with a named error", "[optim]") {
  Var p = leaf(zeros({2, 3}));
  CHECK_THROWS_WITH(SGD(NamedParams{{"p", p}, {"p", leaf(zeros({1}))}}, SGDOptions{}),
                    Contains("'p'"));
  CHECK_THROWS_WITH(SGD(NamedParams{{"p", p}, {"q", p}}, SGDOptions{}), Contains("'q'"));
  CHECK_THROWS_WITH(Adam(NamedParams{{"ids", Var(zeros({3}, DType::i64))}}, AdamOptions{}),
                    Contains("'ids'") && Contains("int64"));
  CHECK_THROWS_WITH(Adam(NamedParams{{"t", leaf(zeros({3, 2}).t())}}, AdamOptions{}),
                    Contains("contiguous"));
  CHECK_THROWS_AS(SGD(NamedParams{{"p", p}}, SGDOptions{0.1, 0.0, 0.0, 0.0, true}),
                  Error);                                                      // nesterov
  CHECK_THROWS_AS(Adam(NamedParams{{"p", p}}, AdamOptions{0.1, 1.0}), Error);  // beta1
  Var q = leaf(ones({4}));
  Adam opt(NamedParams{{"q", q}, {"p", p}}, AdamOptions{});
  CHECK_THROWS_AS(opt.set_lr(-1), Error);
  q.grad() = ones({4});
  p.grad() = zeros({3, 2});
  CHECK_THROWS_WITH(opt.step(), Contains("'p'") && Contains("(3, 2)") && Contains("(2, 3)"));
  CHECK(max_abs_diff(q.data(), ones({4})) == 0.0);  // nothing was updated
  CHECK(opt.steps() == 0);
  // A bare list of Vars is named by position (or the Var's own name).
  Var named = leaf(zeros({1}));
  named.set_name("gain");
  const NamedParams np = name_params({p, named});
  REQUIRE(np.size() == 2);
  CHECK(np[0].first == "0");
  CHECK(np[1].first == "gain");
  CHECK(np[1].second.impl() == named.impl());
}
