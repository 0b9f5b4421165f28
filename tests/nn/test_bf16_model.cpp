// A bf16 training step against the fp32 one (core/precision.hpp): the same DecoderLM, weights
// and batch give a loss and every parameter's gradient within bfloat16's tolerance of the fp32
// step, and not bit-equal to them, so the products did run in bf16; two bf16 steps give the same
// bits. The sizes cross oneDNN's
// blocks and qkv's GEMM bands: 3 x 100 tokens, d_model 96, d_ff 384, a vocabulary of 67.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "core/precision.hpp"
#include "nn/decoder_lm.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

namespace {

struct Step {
  double loss = 0;
  std::map<std::string, Tensor> grads;
};

Step train_step(DecoderLM& lm, const Tensor& ids, const Tensor& targets, Precision p) {
  lm.zero_grad();
  Step s;
  {
    PrecisionScope scope(p);
    const ag::Var logits = lm.forward(ids);  // (B, T, V)
    const int64_t v = logits.shape().back();
    const ag::Var loss = ag::cross_entropy(ag::reshape(logits, {-1, v}), targets.reshape({-1}));
    loss.backward();
    s.loss = loss.data().to(DType::f64).item();
  }
  for (const auto& [name, param] : lm.named_parameters()) s.grads[name] = param.grad().clone();
  return s;
}

// max|a - b| / max|b|
double relative_error(const Tensor& a, const Tensor& b) {
  const Tensor a64 = a.to(DType::f64), b64 = b.to(DType::f64);
  const double scale = std::max(max(abs(b64)).item(), 1e-12);
  return max(abs(sub(a64, b64))).item() / scale;
}

}  // namespace

TEST_CASE("bf16 step: the loss and every gradient within bf16 tolerance of the fp32 step") {
  SKIP_WITHOUT_BF16();
  Generator g(11);
  ModelConfig c = tiny_lm();
  c.src_vocab = c.tgt_vocab = 67;
  c.d_model = 96, c.heads = 4, c.d_ff = 384, c.decoder_layers = 2, c.max_len = 100;
  DecoderLM lm(c, g, std::make_shared<Generator>(1));
  const Tensor ids = randint({3, 100}, 0, 67, g);
  const Tensor targets = randint({3, 100}, 0, 67, g);

  const Step fp32 = train_step(lm, ids, targets, Precision::fp32);
  const Step bf16 = train_step(lm, ids, targets, Precision::bf16);
  const Step again = train_step(lm, ids, targets, Precision::bf16);

  // bf16 keeps 8 significant bits: operands rounded to 2^-9 relative, f32 accumulation.
  CHECK(std::abs(bf16.loss - fp32.loss) <= 1e-2 * std::abs(fp32.loss));
  CHECK(bf16.loss != fp32.loss);
  double worst = 0;
  int differing = 0;
  for (const auto& [name, g32] : fp32.grads) {
    const Tensor& g16 = bf16.grads.at(name);
    CHECK(max(abs(sub(again.grads.at(name), g16))).item() == 0);  // deterministic
    if (name.ends_with("w_k.bias")) {
      // zero in exact arithmetic (softmax ignores a constant added to a row's scores): noise
      INFO(name << ": max|fp32| " << max(abs(g32)).item() << ", max|bf16| "
                << max(abs(g16)).item());
      CHECK(max(abs(g32)).item() <= 1e-6);
      CHECK(max(abs(g16)).item() <= 1e-6);
      continue;
    }
    const double err = relative_error(g16, g32);
    INFO(name << ": relative error " << err);
    CHECK(err <= 2e-2);
    worst = std::max(worst, err);
    differing += err > 0 ? 1 : 0;
  }
  CHECK(differing > static_cast<int>(fp32.grads.size()) / 2);
  std::printf("bf16 step against fp32: loss %.6f vs %.6f, worst gradient error %.3g\n", bf16.loss,
              fp32.loss, worst);
}
