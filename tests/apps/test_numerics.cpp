// Numerical robustness at the extremes training can reach: unscaled attention at d_k = 1024
// (scores with a standard deviation of ~32 times the inputs' scale) and logits of 1e4 give
// finite values and gradients, never NaN, equal to the float64 result within float32's
// rounding; and through the real binary, a non-finite loss stops
// training naming the step and keeping the last checkpoint, or with train.skip_nonfinite is
// skipped.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "autograd/ops.hpp"
#include "core/random.hpp"
#include "support/process.hpp"

using namespace qkv;
using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

// max|a - b| / max|b|, b the float64 reference.
double rel_to(const Tensor& a, const Tensor& b) {
  const double den = max(abs(b)).item();
  return max_abs_diff(a.to(DType::f64), b) / (den > 0 ? den : 1.0);
}

// The largest Euclidean norm of a row (last dim) of x.
double max_row_norm(const Tensor& x) {
  const Tensor x64 = x.to(DType::f64);
  return std::sqrt(max(sum(mul(x64, x64), {-1})).item());
}

// Dense attention in float64, written out from its definition (scale 1): the reference the
// float32 fused kernel is compared with.
ag::Var dense_attention_f64(const ag::Var& q, const ag::Var& k, const ag::Var& v,
                            const Tensor& mask) {
  const ag::Var scores = ag::matmul(q, ag::transpose(k, -2, -1));
  return ag::matmul(ag::softmax(ag::masked_fill(scores, logical_not(mask), -INFINITY), -1), v);
}

}  // namespace

TEST_CASE("numerics: unscaled attention at d_k 1024 matches float64, forward and backward",
          "[unit]") {
  Generator g(7);
  for (const double amp : {1.0, 10.0}) {  // scores ~ N(0, (32 amp^2)^2): up to ~1e4 at amp 10
    ag::Var q(mul(randn({2, 2, 8, 1024}, g), amp), true),
        k(mul(randn({2, 2, 8, 1024}, g), amp), true), v(randn({2, 2, 8, 16}, g), true);
    Tensor mask = ones({8, 8}, DType::b8);
    mask.data<uint8_t>()[0] = 0;                            // one masked key in the first row
    const ag::Var out = ag::attention(q, k, v, mask, 1.0);  // scale 1: no 1/sqrt(d_k)
    INFO("amp " << amp);
    REQUIRE(all_finite(out.data()));
    const Tensor R = randn(out.shape(), g);
    const std::vector<Tensor> grads = ag::grad({out}, {R}, {q, k, v});
    for (const Tensor& gr : grads) REQUIRE(all_finite(gr));
    // The same inputs, rounded to float32 once, through the definition in float64.
    ag::Var q64(q.data().to(DType::f64), true), k64(k.data().to(DType::f64), true),
        v64(v.data().to(DType::f64), true);
    const ag::Var ref = dense_attention_f64(q64, k64, v64, mask);
    const std::vector<Tensor> ref_grads = ag::grad({ref}, {R.to(DType::f64)}, {q64, k64, v64});
    CHECK(rel_to(out.data(), ref.data()) < 1e-5);
    CHECK(rel_to(grads[2], ref_grads[2]) < 1e-4);  // dv = P^T dO
    // dq = dS k and dk = dS^T q with dS = P * (dP - rowsum(dO * O)). Where a row is saturated
    // (P one-hot: every row at amp 10), dP and the row sum agree in exact arithmetic and dS,
    // hence dq and dk, vanish (float64: ~1e-24). In float32 their difference is rounding of
    // terms of size |dO| |v|: that noise, times |k| (or |q|), is the absolute error allowed
    // on top of the relative 1e-4.
    const double eps = std::numeric_limits<float>::epsilon();
    const double cancel = eps * max_row_norm(R) * max_row_norm(v.data());
    const double noise[] = {cancel * max_row_norm(k.data()), cancel * max_row_norm(q.data())};
    const char* names[] = {"dq", "dk"};
    for (int i = 0; i < 2; ++i) {
      const double diff = max_abs_diff(grads[i].to(DType::f64), ref_grads[i]);
      const double ref_max = max(abs(ref_grads[i])).item();
      INFO(names[i] << ": max|ours - float64| " << diff << ", max|float64| " << ref_max
                    << ", rounding noise bound " << noise[i]);
      CHECK(diff <= 1e-4 * ref_max + noise[i]);
    }
  }
}

TEST_CASE("numerics: logits of 1e4 give the float64 softmax, cross-entropy and gradient",
          "[unit]") {
  Generator g(3);
  ag::Var logits(mul(randn({16, 50}, g), 1e4), true);
  const Tensor targets =
      from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {16});
  ag::Var logits64(logits.data().to(DType::f64), true);
  for (const double smoothing : {0.0, 0.1}) {
    logits.zero_grad();
    logits64.zero_grad();
    const ag::Var loss = ag::cross_entropy(logits, targets, -100, smoothing);
    const ag::Var loss64 = ag::cross_entropy(logits64, targets, -100, smoothing);
    INFO("smoothing " << smoothing << ": loss " << loss.item() << ", float64 " << loss64.item());
    REQUIRE(std::isfinite(loss.item()));
    CHECK(std::abs(loss.item() - loss64.item()) <= 1e-5 * std::abs(loss64.item()));
    loss.backward();
    loss64.backward();
    REQUIRE(all_finite(logits.grad()));
    CHECK(rel_to(logits.grad(), logits64.grad()) < 1e-5);
  }
  const Tensor l64 = logits64.data();
  CHECK(rel_to(softmax(logits.data(), -1), softmax(l64, -1)) < 1e-6);
  CHECK(rel_to(log_softmax(logits.data(), -1), log_softmax(l64, -1)) < 1e-6);
  // +-1e4 in one row: the small entry underflows to probability 0, not NaN.
  const Tensor row = from_vector(std::vector<float>{1e4f, -1e4f, 0.f}, {1, 3});
  CHECK(all_finite(softmax(row, -1)));
  CHECK(softmax(row, -1).data<float>()[0] == 1.0f);
}

namespace {
// sgd at lr 1e6 without clipping: the loss overflows within a few steps.
std::string diverging(const std::string& run) {
  return "train '" + source_dir() + "/configs/copy.toml' --run-dir " + run +
         " --threads 1 --quiet --data.train_size 300 --data.valid_size 20 --data.test_size 20"
         " --train.max_steps 40 --train.log_every 1 --checkpoint.every 1 --optim.warmup 1"
         " --optim.clip_norm 0 --optim.name sgd --optim.lr 1e6";
}
}  // namespace

TEST_CASE("numerics: a non-finite loss stops training naming the step, keeping the last checkpoint",
          "[e2e]") {
  TempDir t("nonfinite");
  const std::string run = t.file("run");
  const RunResult r = run_qkv(diverging(run));
  INFO(r.output);
  CHECK(r.status == 1);
  const auto at = r.output.find("step ");
  REQUIRE(at != std::string::npos);
  const int step = std::stoi(r.output.substr(at + 5));
  CHECK(step >= 2);
  CHECK(r.output.find("loss is") != std::string::npos);
  CHECK(r.output.find("skip_nonfinite") != std::string::npos);
  // The checkpoint of the step before is there, named in the message, and loads.
  char name[32];
  std::snprintf(name, sizeof name, "step-%08d", step - 1);
  CHECK(r.output.find(name) != std::string::npos);
  CHECK(fs::exists(fs::path(run) / "checkpoints" / name / "model.safetensors"));
  const RunResult e = run_qkv("eval " + run + " --checkpoint latest --json");
  INFO(e.output);
  CHECK(e.status == 0);

  // train.skip_nonfinite: the same run goes on, logging each skipped step.
  const std::string run2 = t.file("skip");
  const RunResult s = run_qkv(diverging(run2) + " --train.skip_nonfinite true");
  INFO(s.output);
  CHECK(s.status == 0);
  std::ifstream in(run2 + "/metrics.jsonl");
  int skipped = 0;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("skipped")) {
      ++skipped;
      CHECK(j["step"].get<int>() >= step);  // same seed: the first bad step is the same
    }
  }
  CHECK(skipped >= 1);
}

TEST_CASE("numerics: in anomaly mode a non-finite step names the step, the op and its module",
          "[e2e]") {
  TempDir t("anomaly");
  const std::string run = t.file("run");
  ::setenv("QKV_ANOMALY", "1", 1);  // read by the child qkv at start-up, not by this process
  const RunResult r = run_qkv(diverging(run));
  ::unsetenv("QKV_ANOMALY");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find("train: step ") != std::string::npos);
  CHECK(r.output.find("anomaly: ") != std::string::npos);
  CHECK(r.output.find(" of op '") != std::string::npos);
  CHECK(r.output.find(" in module '") != std::string::npos);
  CHECK(r.output.find("last good checkpoint: ") != std::string::npos);
  CHECK(r.output.find("Segmentation") == std::string::npos);
}
