// Muon: the Newton-Schulz orthogonalization's singular values and vectors, one step worked by
// hand, the routing rule on both model kinds, save/load/resume, thread-count independence and
// misuse. (Its parity with modded-nanogpt's code in torch: test_optim_reference.cpp.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/bf16.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "core/random.hpp"
#include "nn/decoder_lm.hpp"
#include "nn/seq2seq.hpp"
#include "optim/config.hpp"
#include "optim/muon.hpp"
#include "optim/schedule.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::optim;
using Catch::Matchers::Contains;
using qkv::testing::ScopedThreads;

// A parameter: a leaf that requires grad.
static Var leaf(Tensor t) { return Var(std::move(t), true); }

namespace {

// The eigenvalues of a symmetric n x n matrix (row-major, double), ascending, by cyclic Jacobi
// rotations: slow but plain, and exact to rounding for the small matrices here.
std::vector<double> symmetric_eigenvalues(std::vector<double> a, int64_t n) {
  auto at = [&](int64_t i, int64_t j) -> double& { return a[static_cast<size_t>(i * n + j)]; };
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) off += at(i, j) * at(i, j);
    if (off < 1e-26) break;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        if (at(p, q) == 0) continue;
        // the rotation in the (p, q) plane that zeroes a[p][q]
        const double theta = (at(q, q) - at(p, p)) / (2 * at(p, q));
        const double t = (theta >= 0 ? 1 : -1) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int64_t k = 0; k < n; ++k) {  // columns p, q
          const double kp = at(k, p), kq = at(k, q);
          at(k, p) = c * kp - s * kq;
          at(k, q) = s * kp + c * kq;
        }
        for (int64_t k = 0; k < n; ++k) {  // rows p, q
          const double pk = at(p, k), qk = at(q, k);
          at(p, k) = c * pk - s * qk;
          at(q, k) = s * pk + c * qk;
        }
      }
  }
  std::vector<double> ev;
  for (int64_t i = 0; i < n; ++i) ev.push_back(at(i, i));
  std::sort(ev.begin(), ev.end());
  return ev;
}

// m's singular values (the square roots of the eigenvalues of its smaller Gram matrix).
std::vector<double> singular_values(const Tensor& m) {
  const Tensor d = m.to(DType::f64);
  const Tensor gram = d.size(0) <= d.size(1) ? matmul(d, d.t()) : matmul(d.t(), d);
  std::vector<double> sv = symmetric_eigenvalues(to_vector<double>(gram), gram.size(0));
  for (double& v : sv) v = std::sqrt(std::max(v, 0.0));
  return sv;
}

// A step's gradient for parameter i at step t: N(0, 1) times a scale that varies over steps.
Tensor grad_at(const Var& p, size_t i, int t) {
  Generator g(7000 + 31 * static_cast<uint64_t>(t) + i);
  return mul(randn(p.shape(), g, p.dtype()), 0.5 + 0.1 * t);
}

// A block's worth of parameters under names the rule routes: three matrices (tall, wide, one
// large enough to be split into bands outside Muon's region), a bias and an embedding.
NamedParams block_params(DType dt = DType::f32) {
  Generator g(11);
  return {{"blocks.layers.0.ffn.linear1.weight", leaf(randn({64, 16}, g, dt))},
          {"blocks.layers.0.ffn.linear2.weight", leaf(randn({16, 64}, g, dt))},
          {"blocks.layers.1.self_attn.w_q.weight", leaf(randn({160, 200}, g, dt))},
          {"blocks.layers.0.ffn.linear1.bias", leaf(randn({64}, g, dt))},
          {"embed.weight", leaf(randn({30, 16}, g, dt))}};
}

OptimConfig muon_config() {
  OptimConfig c;
  c.name = OptimizerKind::muon, c.lr = 0.01, c.weight_decay = 0.05, c.muon_lr = 0.03;
  return c;
}

void run(Optimizer& opt, NamedParams& ps, int from, int to, const ScheduleConfig& sc) {
  for (int t = from; t < to; ++t) {
    apply_schedule(opt, sc);
    for (size_t i = 0; i < ps.size(); ++i)
      ps[i].second.grad() = (i == 1 && t == 4) ? Tensor() : grad_at(ps[i].second, i, t);
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

// Well-conditioned inputs whose singular values after the Frobenius normalization are all
// below 0.35: wide and tall Gaussian matrices (singular values 16 +- 4 of a norm of 64) and
// the identity plus noise.
std::vector<Tensor> orthogonalization_inputs() {
  Generator gen(3);
  const Tensor wide = randn({16, 256}, gen), tall = randn({256, 16}, gen);
  Tensor square = mul(randn({32, 32}, gen), 0.3 / std::sqrt(32.0));
  for (int64_t i = 0; i < 32; ++i) square.data<float>()[i * 33] += 1.0f;  // + I
  return {wide, tall, square};
}

// o = newton_schulz5(g) has every singular value in [0.5, 1.5] and g's singular vectors, up
// to an asymmetry of O G^T of at most symmetry_tol of its largest entry.
void check_orthogonalized(const Tensor& g, const Tensor& o, double symmetry_tol) {
  INFO("input " << shape_str(g.shape()));
  const double norm = std::sqrt(sum(mul(g, g)).item());
  const std::vector<double> before = singular_values(g);
  CHECK(before.back() / norm < 0.35);  // the property does not hold before
  REQUIRE(o.shape() == g.shape());
  const std::vector<double> after = singular_values(o);
  INFO("singular values from " << after.front() << " to " << after.back());
  CHECK(after.front() >= 0.5);
  CHECK(after.back() <= 1.5);
  // Same singular vectors: G = U S V^T and O = U f(S) V^T make O G^T = U f(S) S U^T (wide;
  // O^T G for tall) symmetric positive definite. A wrong transpose or a rotation is not.
  const Tensor o64 = o.to(DType::f64), g64 = g.to(DType::f64);
  const Tensor m = g.size(0) <= g.size(1) ? matmul(o64, g64.t()) : matmul(o64.t(), g64);
  const double scale = max(abs(m)).item();
  CHECK(max(abs(sub(m, m.t()))).item() <= symmetry_tol * scale);
  const std::vector<double> ev =
      symmetric_eigenvalues(to_vector<double>(mul(add(m, m.t()), 0.5)), m.size(0));
  CHECK(ev.front() > 0);
}

}  // namespace

TEST_CASE("newton_schulz5 puts every singular value in [0.5, 1.5] and keeps the singular vectors",
          "[optim][muon]") {
  for (const Tensor& g : orthogonalization_inputs())
    check_orthogonalized(g, newton_schulz5(g), 1e-5);
  CHECK_THROWS_WITH(newton_schulz5(zeros({2, 3}, DType::f64)), Contains("float32"));
  CHECK_THROWS_WITH(newton_schulz5(zeros({6})), Contains("2-D"));
}

TEST_CASE("newton_schulz5 in bf16 puts every singular value in [0.5, 1.5] as well",
          "[optim][muon]") {
  SKIP_WITHOUT_BF16();
  // O G^T is symmetric up to O's rounding: bf16 keeps 8 significant bits (2^-8 = 0.4%), and
  // each entry of O G^T sums many of O's rounded entries, so the asymmetry is a few times
  // 2^-8 of the largest entry (0.6% to 1.1% for these inputs in the torch reference).
  for (const Tensor& g : orthogonalization_inputs()) {
    const Tensor o = newton_schulz5(g, Precision::bf16);
    check_orthogonalized(g, o, 2e-2);
    // The result is bf16 values widened: the low 16 bits of every float are zero.
    for (float v : to_vector<float>(o)) CHECK(bf16_to_float(bf16_round(v)) == v);
  }
  CHECK_THROWS_WITH(newton_schulz5(zeros({2, 3}), Precision::auto_), Contains("auto"));
}

TEST_CASE("Muon: one step on rank-1 gradients by hand", "[optim][muon]") {
  // A rank-1 u = s x y^T (unit x, y) has one singular value; Newton-Schulz maps it, after the
  // normalization to ||u|| / (||u|| + 1e-7), through f(v) = a v + b v^3 + c v^5 five times, and
  // O = f(...) x y^T. Steps: tall (4, 2) gets sqrt(4 / 2) times the rate, wide (2, 4) not.
  auto f5 = [](double v) {
    for (int k = 0; k < 5; ++k) v = 3.4445 * v - 4.7750 * v * v * v + 2.0315 * v * v * v * v * v;
    return v;
  };
  const Tensor x = tensor({0.6, 0.8}, {2, 1}), y = tensor({0.5, 0.5, 0.5, -0.5}, {1, 4});
  const Tensor g_wide = mul(matmul(x, y), 3.0);  // (2, 4), singular value 3
  Var wide = leaf(full({2, 4}, 0.5)), tall = leaf(full({4, 2}, 0.5)), bias = leaf(zeros({3}));
  MuonOptions o;
  o.lr = 0.1, o.momentum = 0.5, o.adamw.lr = 0.01;
  Muon opt({ParamGroup{{{"w", wide}, {"t", tall}}, 0.2}}, {ParamGroup{{{"b", bias}}, 0.0}}, o);
  opt.set_lr(0.005);  // half the AdamW peak: the matrices also step at half theirs
  CHECK(opt.muon_lr() == Approx(0.05).epsilon(1e-15));
  wide.grad() = g_wide;
  tall.grad() = g_wide.t().contiguous();
  bias.grad() = tensor({1.0, -2.0, 0.0}, {3});
  opt.step();
  // m = g, u = g + 0.5 g = 1.5 g: singular value 4.5.
  const double v = f5(4.5 / (4.5 + 1e-7));
  const Tensor dir = matmul(x, y);  // x y^T, unit singular value
  const Tensor want_wide = sub(full({2, 4}, 0.5 * (1 - 0.05 * 0.2)), mul(dir, 0.05 * v));
  const Tensor want_tall =
      sub(full({4, 2}, 0.5 * (1 - 0.05 * 0.2)), mul(dir.t(), 0.05 * std::sqrt(2.0) * v));
  CHECK(max_abs_diff(wide.data(), want_wide) < 2e-6);
  CHECK(max_abs_diff(tall.data(), want_tall) < 2e-6);
  // The bias took AdamW's first step: lr g / |g| (0 where g is 0).
  CHECK(bias.data().at({0}) == Approx(-0.005).epsilon(1e-6));
  CHECK(bias.data().at({1}) == Approx(0.005).epsilon(1e-6));
  CHECK(bias.data().at({2}) == 0.0);
  const OptimState s = opt.state();
  CHECK(s.optimizer == "muon");
  std::vector<std::string> names;
  for (const auto& nt : s.tensors) names.push_back(nt.first);
  CHECK(names == std::vector<std::string>{"w.momentum_buffer", "t.momentum_buffer", "b.exp_avg",
                                          "b.exp_avg_sq"});
  CHECK(max_abs_diff(s.tensors[0].second, g_wide) == 0.0);  // m = g after one step
}

TEST_CASE("Muon routes block matrices to Newton-Schulz and embeddings, head, 1-D params to AdamW",
          "[optim][muon]") {
  // The matrices expected, found by walking the models' blocks rather than by name.
  auto block_weights = [](const auto& layers, std::set<const ag::VarImpl*>& out) {
    for (const auto& layer : layers) {
      std::vector<std::shared_ptr<nn::MultiHeadAttention>> attns{layer->self_attn};
      if constexpr (requires { layer->cross_attn; }) attns.push_back(layer->cross_attn);
      for (const auto& a : attns)
        for (const auto& lin : {a->w_q, a->w_k, a->w_v, a->w_o}) out.insert(lin->weight.impl());
      for (const auto& lin : {layer->ffn->linear1, layer->ffn->linear2, layer->ffn->linear3})
        if (lin) out.insert(lin->weight.impl());
    }
  };
  auto check_routing = [](const nn::Module& m, const std::set<const ag::VarImpl*>& want) {
    int64_t matrices = 0, others = 0;
    for (const auto& [name, p] : m.named_parameters()) {
      INFO(name << " " << shape_str(p.shape()));
      CHECK(is_hidden_matrix(name, p) == (want.count(p.impl()) == 1));
      ++(is_hidden_matrix(name, p) ? matrices : others);
    }
    CHECK(matrices == static_cast<int64_t>(want.size()));
    CHECK(others > 0);
    // What the factory builds: momentum buffers for those matrices, Adam's moments for the rest.
    NamedParams ps = m.named_parameters();
    auto opt = make_optimizer(muon_config(), ps);
    for (auto& [name, p] : ps) p.grad() = zeros(p.shape());
    opt->step();
    for (const auto& [key, t] : opt->state().tensors) {
      INFO(key);
      const bool momentum = key.ends_with(".momentum_buffer");
      CHECK((momentum || key.ends_with(".exp_avg") || key.ends_with(".exp_avg_sq")));
      if (momentum) CHECK(t.dim() == 2);
    }
  };
  Generator gen(1);
  SECTION("Seq2Seq: shared embeddings tied to the output, relative position biases") {
    nn::ModelConfig c;
    c.src_vocab = c.tgt_vocab = 9, c.d_model = 8, c.heads = 2, c.d_ff = 12, c.dropout = 0;
    c.encoder_layers = 1, c.decoder_layers = 2;
    c.share_embeddings = c.tie_output = true;
    c.position = nn::PositionKind::relative;
    nn::Seq2Seq m(c, gen);
    std::set<const ag::VarImpl*> want;
    block_weights(m.encoder->layers, want);
    block_weights(m.decoder->layers, want);
    REQUIRE(want.size() == 6 + 2 * 10);
    check_routing(m, want);
  }
  SECTION("Seq2Seq: separate embeddings, learned positions, untied output, swiglu, additive") {
    nn::ModelConfig c;
    c.src_vocab = 9, c.tgt_vocab = 7, c.d_model = 8, c.heads = 2, c.d_ff = 12, c.dropout = 0;
    c.encoder_layers = 2, c.decoder_layers = 1;
    c.position = nn::PositionKind::learned, c.activation = nn::Activation::swiglu;
    c.attention = nn::AttentionKind::additive;
    nn::Seq2Seq m(c, gen);
    std::set<const ag::VarImpl*> want;
    block_weights(m.encoder->layers, want);
    block_weights(m.decoder->layers, want);
    REQUIRE(want.size() == 2 * 7 + 11);
    check_routing(m, want);
  }
  for (const bool tied : {true, false}) {
    DYNAMIC_SECTION("DecoderLM, " << (tied ? "tied" : "untied") << " head") {
      nn::ModelConfig c = nn::ModelConfig::decoder_defaults();
      c.src_vocab = c.tgt_vocab = 7, c.d_model = 8, c.heads = 2, c.d_ff = 12, c.dropout = 0;
      c.decoder_layers = 2, c.max_len = 16, c.position = nn::PositionKind::learned;
      c.tie_output = tied;
      nn::DecoderLM m(c, gen);
      std::set<const ag::VarImpl*> want;
      block_weights(m.blocks->layers, want);
      REQUIRE(want.size() == 2 * 6);
      check_routing(m, want);
    }
  }
}

TEST_CASE("Muon: save after 10 steps, load into a fresh optimizer, 10 more = 20 uninterrupted",
          "[optim][muon]") {
  const ScopedThreads two(2);
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(dtype_name(dt));
    ScheduleConfig sc;
    sc.name = ScheduleKind::cosine, sc.lr = 0.01, sc.warmup = 3, sc.total_steps = 20,
    sc.min_lr = 0.001;
    NamedParams a = block_params(dt);
    auto straight = make_optimizer(muon_config(), a);
    run(*straight, a, 0, 20, sc);

    NamedParams b = block_params(dt);
    auto first = make_optimizer(muon_config(), b);
    run(*first, b, 0, 10, sc);
    const OptimState saved = copied(first->state());
    NamedParams c;
    for (const auto& [n, p] : b) c.emplace_back(n, leaf(p.data().clone()));
    auto resumed = make_optimizer(muon_config(), c);
    resumed->load_state(saved);
    CHECK(resumed->steps() == 10);
    run(*resumed, c, 10, 20, sc);
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(a[i].first);
      CHECK(max_abs_diff(a[i].second.data(), c[i].second.data()) == 0.0);
    }
  }
  // A buffer of the other rule is refused, naming it.
  NamedParams ps = block_params();
  auto opt = make_optimizer(muon_config(), ps);
  run(*opt, ps, 0, 2, ScheduleConfig{});
  const OptimState good = copied(opt->state());
  {
    OptimState s = good;
    s.tensors.emplace_back("blocks.layers.0.ffn.linear1.weight.exp_avg", zeros({64, 16}));
    CHECK_THROWS_WITH(make_optimizer(muon_config(), ps)->load_state(s),
                      Contains("linear1.weight.exp_avg"));
  }
  {
    OptimState s = good;
    s.tensors.emplace_back("embed.weight.momentum_buffer", zeros({30, 16}));
    CHECK_THROWS_WITH(make_optimizer(muon_config(), ps)->load_state(s),
                      Contains("embed.weight.momentum_buffer"));
  }
  {
    OptimState s = good;
    s.optimizer = "adamw";
    CHECK_THROWS_WITH(make_optimizer(muon_config(), ps)->load_state(s), Contains("'muon'"));
  }
}

TEST_CASE("Muon: updates are bit-identical at 1, 2 and 3 threads", "[optim][muon]") {
  // The (160, 200) matrix is large enough that a matmul outside Muon's region would be split
  // into per-thread bands, whose last bits may depend on the thread count.
  std::vector<std::vector<float>> result;
  for (int threads : {1, 2, 3}) {
    const ScopedThreads scoped(threads);
    NamedParams ps = block_params();
    auto opt = make_optimizer(muon_config(), ps);
    run(*opt, ps, 0, 3, ScheduleConfig{});
    std::vector<float> all;
    for (const auto& np : ps) {
      const std::vector<float> v = to_vector<float>(np.second.data());
      all.insert(all.end(), v.begin(), v.end());
    }
    result.push_back(all);
  }
  CHECK(result[0] == result[1]);
  CHECK(result[0] == result[2]);
}

// bf16 Muon's parameters against fp32 Muon's after three steps, as a fraction of the fp32
// displacement. bf16 keeps 8 significant bits, and the iterations spread a rounding: 1.7% to
// 3.1% here. A fault of the bf16 path (an operand transposed, a term lost) is of the order of
// the displacement itself.
constexpr double kBf16StepTolerance = 0.1;

TEST_CASE("Muon in bf16: updates are bit-identical at 1 and 2 threads, AdamW's as in fp32",
          "[optim][muon]") {
  SKIP_WITHOUT_BF16();
  // Three steps of block_params (a tall, a wide and a (160, 200) matrix) in each setting.
  auto three_steps = [](int threads, Precision p) {
    const ScopedThreads scoped(threads);
    const PrecisionScope scope(p);  // the precision step() runs in
    NamedParams ps = block_params();
    auto opt = make_optimizer(muon_config(), ps);
    run(*opt, ps, 0, 3, ScheduleConfig{});
    std::vector<std::vector<float>> values;
    for (const auto& np : ps) values.push_back(to_vector<float>(np.second.data()));
    return values;
  };
  const auto one = three_steps(1, Precision::bf16), two = three_steps(2, Precision::bf16);
  const auto fp32 = three_steps(2, Precision::fp32);
  const NamedParams names = block_params();
  for (size_t i = 0; i < names.size(); ++i) {
    INFO(names[i].first);
    CHECK(one[i] == two[i]);
    // The matrices took the bf16 iteration; AdamW's parameters are elementwise float32 either way.
    const bool matrix = is_hidden_matrix(names[i].first, names[i].second);
    CHECK((one[i] == fp32[i]) == !matrix);
    if (!matrix) continue;
    // ... by nearly fp32's steps: the difference a small fraction of the displacement.
    const std::vector<float> init = to_vector<float>(names[i].second.data());
    double diff = 0, moved = 0;
    for (size_t k = 0; k < init.size(); ++k) {
      diff = std::max(diff, static_cast<double>(std::abs(one[i][k] - fp32[i][k])));
      moved = std::max(moved, static_cast<double>(std::abs(fp32[i][k] - init[k])));
    }
    INFO("bf16 differs from fp32 by " << diff / moved << " of the displacement");
    CHECK(diff <= kBf16StepTolerance * moved);
  }
}

TEST_CASE("Muon: misuse is a named error", "[optim][muon]") {
  NamedParams ps = block_params();
  OptimConfig c = muon_config();
  c.lr = 0;
  CHECK_THROWS_WITH(make_optimizer(c, ps), Contains("optim.lr") && Contains("> 0"));
  c = muon_config(), c.muon_momentum = 1;
  CHECK_THROWS_WITH(make_optimizer(c, ps), Contains("optim.muon_momentum"));
  c = muon_config(), c.muon_lr = -1;
  CHECK_THROWS_WITH(make_optimizer(c, ps), Contains("optim.muon_lr"));
  c = muon_config(), c.momentum = 0.9;
  CHECK_THROWS_WITH(make_optimizer(c, ps), Contains("muon_momentum"));
  // No parameter the rule routes: muon would silently be AdamW.
  CHECK_THROWS_WITH(make_optimizer(muon_config(), NamedParams{{"w", leaf(zeros({4, 4}))}}),
                    Contains("optim.name") && Contains("no hidden-layer matrix"));
  // noam has no lr to take the ratio of.
  OptimSection s;
  s.optim = muon_config();
  s.schedule.name = ScheduleKind::noam, s.schedule.warmup = 10;
  CHECK_THROWS_WITH(s.validate(), Contains("optim.schedule") && Contains("noam"));
  // Built directly: a "matrix" must be 2-D.
  CHECK_THROWS_WITH(Muon({ParamGroup{{{"v", leaf(zeros({4}))}}, {}}}, {}, MuonOptions{}),
                    Contains("'v'") && Contains("not a matrix"));
}
