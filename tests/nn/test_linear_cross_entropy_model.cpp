// The output layer and its loss as one op (ag::linear_cross_entropy, autograd/ops_loss.cpp) and
// Model::forward_loss (nn/model.cpp), which takes it unless a hook asks for the logits or they
// are soft-capped. Outside a bf16 PrecisionScope, and for float64 in one, the op is linear then
// cross_entropy bit for bit; in a bf16 scope it is one op on the tape, "linear_cross_entropy"
// (core/linear_cross_entropy.cpp), within bfloat16's tolerance of linear then cross_entropy in
// the same scope, for the op alone and for a Seq2Seq (an output layer with a bias, and one tied
// to the target embedding) and a DecoderLM (tied, and an output matrix of its own), with label
// smoothing and ignored targets, over more than one 128-row chunk. With the logits hooked or a
// soft cap, forward_loss in bf16 is forward then cross_entropy bit for bit; hooks on other
// points leave it fused, bit for bit.
// The kernels against float32: tests/core/test_linear_cross_entropy.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "core/precision.hpp"
#include "nn/hooks.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

namespace {

// The op that recorded v ("" for a leaf or an unrecorded result).
std::string op_of(const ag::Var& v) { return v.impl()->node ? v.impl()->node->op : ""; }

double max_abs(const Tensor& t) { return max(abs(t.to(DType::f64))).item(); }

// --- the op alone ---

struct OpInputs {
  Tensor x, w, b, t;  // x (2, 75, d): 150 rows; w (V, d); b (V) or undefined; t (150)
  int64_t ignore = -100;
  double eps = 0;
};

OpInputs op_inputs(DType dt, bool bias, double eps, uint64_t seed) {
  Generator g(seed);
  const int64_t d = 24, v = 131;
  OpInputs in;
  in.x = randn({2, 75, d}, g, dt);
  in.w = mul(randn({v, d}, g, dt), 0.3);
  if (bias) in.b = randn({v}, g, dt);
  in.t = randint({150}, 0, v, g);
  int64_t* t = in.t.data<int64_t>();
  for (int64_t i : {0, 17, 127, 128, 149}) t[i] = in.ignore;
  in.eps = eps;
  return in;
}

struct OpRun {
  Tensor loss;
  std::string op;
  Tensor dx, dw, db;
};

// ag::linear_cross_entropy (fused = true) or cross_entropy(reshape(linear(x, w, b))), forward
// and backward in a scope of precision p; x, w and b require grad.
OpRun run_op(const OpInputs& in, bool fused, Precision p) {
  PrecisionScope scope(p);
  const ag::Var x(in.x, true), w(in.w, true), b = in.b.defined() ? ag::Var(in.b, true) : ag::Var();
  const ag::Var loss = fused
                           ? ag::linear_cross_entropy(x, w, b, in.t, in.ignore, in.eps)
                           : ag::cross_entropy(ag::reshape(ag::linear(x, w, b), {-1, in.w.size(0)}),
                                               in.t, in.ignore, in.eps);
  OpRun r;
  r.op = op_of(loss);
  loss.backward();
  r.loss = loss.data();
  r.dx = x.grad();
  r.dw = w.grad();
  if (b.defined()) r.db = b.grad();
  return r;
}

void check_same_bits(const OpRun& a, const OpRun& c) {
  CHECK(same_bits(a.loss, c.loss));
  CHECK(same_bits(a.dx, c.dx));
  CHECK(same_bits(a.dw, c.dw));
  CHECK(a.db.defined() == c.db.defined());
  if (c.db.defined()) CHECK(same_bits(a.db, c.db));
}

// --- models ---

struct Batch {
  Tensor src, tgt_in, src_valid, tgt_valid, tgt_out;
  int64_t ignore = -100;
  double eps = 0;
};

// An encoder-decoder over 3 x 50 target positions (150 rows), 131 target words; padding id 0
// is the ignored target, label smoothing 0.1.
ModelConfig seq2seq_config(bool tie_output) {
  ModelConfig c;
  c.src_vocab = 23;
  c.tgt_vocab = 131;
  c.d_model = 32;
  c.heads = 4;
  c.d_ff = 64;
  c.encoder_layers = 1;
  c.decoder_layers = 1;
  c.dropout = 0;
  c.tie_output = tie_output;
  return c;
}

Batch seq2seq_batch(uint64_t seed) {
  Generator g(seed);
  Batch b;
  b.src = randint({3, 20}, 1, 23, g);
  b.tgt_in = randint({3, 50}, 1, 131, g);
  b.tgt_out = randint({3, 50}, 1, 131, g);
  b.src_valid = ones({3, 20}, DType::b8);
  b.src_valid.select(0, 1).narrow(0, 15, 5).zero_();
  b.tgt_valid = ones({3, 50}, DType::b8);
  b.tgt_valid.select(0, 2).narrow(0, 40, 10).zero_();
  int64_t* out = b.tgt_out.data<int64_t>();
  for (int64_t j = 40; j < 50; ++j) out[2 * 50 + j] = 0;  // padding
  b.ignore = 0;
  b.eps = 0.1;
  return b;
}

// A language model over 3 x 100 positions (300 rows: three chunks), 67 tokens, some targets
// ignored (-100), label smoothing 0.1.
ModelConfig lm_config(bool tie_output, double softcap = 0) {
  ModelConfig c = tiny_lm();
  c.src_vocab = c.tgt_vocab = 67;
  c.d_model = 32, c.heads = 4, c.d_ff = 64, c.decoder_layers = 2, c.max_len = 100;
  c.tie_output = tie_output;
  c.logit_softcap = softcap;
  return c;
}

Batch lm_batch(uint64_t seed) {
  Generator g(seed);
  Batch b;
  b.tgt_in = randint({3, 100}, 0, 67, g);
  b.tgt_out = randint({3, 100}, 0, 67, g);
  int64_t* out = b.tgt_out.data<int64_t>();
  for (int64_t i = 0; i < 300; i += 11) out[i] = -100;
  out[127] = out[128] = out[299] = -100;
  b.ignore = -100;
  b.eps = 0.1;
  return b;
}

struct ModelRun {
  Tensor loss;
  std::string op;
  std::map<std::string, Tensor> grads;
};

// One step's loss and gradients in precision p: forward_loss, or forward then cross_entropy
// as the trainer did before forward_loss; with hooks in scope when given.
ModelRun run_model(Model& m, const Batch& b, bool forward_loss, Precision p,
                   Hooks* hooks = nullptr) {
  m.zero_grad();
  ModelRun r;
  {
    PrecisionScope scope(p);
    std::optional<HookScope> hooked;
    if (hooks) hooked.emplace(*hooks);
    ag::Var loss;
    if (forward_loss) {
      loss = m.forward_loss(b.src, b.tgt_in, b.src_valid, b.tgt_valid, b.tgt_out, b.ignore, b.eps);
    } else {
      const ag::Var logits = m.forward(b.src, b.tgt_in, b.src_valid, b.tgt_valid);
      loss = ag::cross_entropy(ag::reshape(logits, {-1, logits.size(-1)}), b.tgt_out.flatten(),
                               b.ignore, b.eps);
    }
    r.op = op_of(loss);
    loss.backward();
    r.loss = loss.data().clone();
  }
  for (const auto& [name, param] : m.named_parameters())
    r.grads[name] = param.grad().defined() ? param.grad().clone() : Tensor();
  return r;
}

void check_models_same_bits(const ModelRun& a, const ModelRun& c) {
  CHECK(same_bits(a.loss, c.loss));
  REQUIRE(a.grads.size() == c.grads.size());
  for (const auto& [name, gc] : c.grads) {
    INFO(name);
    const Tensor& ga = a.grads.at(name);
    CHECK(ga.defined() == gc.defined());
    if (gc.defined()) CHECK(same_bits(ga, gc));
  }
}

// forward_loss's run a against forward then cross_entropy's c, both in bf16: the loss to
// float32 accumulation (the logits are the same bf16 products), each gradient within bf16's
// tolerance (both round the logits' gradient to bf16 for the products; they round slightly
// different float32 values).
void check_models_close(const ModelRun& a, const ModelRun& c) {
  const double fa = a.loss.item(), fc = c.loss.item();
  INFO("loss " << fa << " vs " << fc);
  CHECK(std::abs(fa - fc) <= 1e-5 * std::abs(fc));
  REQUIRE(a.grads.size() == c.grads.size());
  int checked = 0;
  for (const auto& [name, gc] : c.grads) {
    INFO(name);
    const Tensor& ga = a.grads.at(name);
    REQUIRE(ga.defined() == gc.defined());
    if (!gc.defined()) continue;
    CHECK(all_finite(ga));
    if (name.ends_with("w_k.bias")) {
      // zero in exact arithmetic (softmax ignores a constant added to a row's scores): noise
      CHECK(max_abs(sub(ga, gc)) <= 1e-5);
      continue;
    }
    const double err = rel_err(ga, gc);
    INFO("relative error " << err << ", max |grad| " << max_abs(gc));
    CHECK(err <= 1e-2);
    CHECK(max_abs(gc) > 0);
    ++checked;
  }
  CHECK(checked > 5);
}

}  // namespace

TEST_CASE("ag linear_cross_entropy outside bf16 is linear then cross_entropy bit for bit") {
  uint64_t seed = 3;
  for (const DType dt : {DType::f32, DType::f64}) {
    for (const bool bias : {true, false}) {
      for (const double eps : {0.0, 0.1}) {
        INFO(dtype_name(dt) << " bias " << bias << " smoothing " << eps);
        const OpInputs in = op_inputs(dt, bias, eps, seed++);
        const OpRun a = run_op(in, true, Precision::fp32), c = run_op(in, false, Precision::fp32);
        CHECK(a.op == "cross_entropy");
        CHECK(a.dx.shape() == in.x.shape());
        check_same_bits(a, c);
      }
    }
  }
}

TEST_CASE("ag linear_cross_entropy in bf16 is one op within bf16 tolerance of linear then loss") {
  SKIP_WITHOUT_BF16();
  uint64_t seed = 13;
  for (const bool bias : {true, false}) {
    for (const double eps : {0.0, 0.1}) {
      INFO("bias " << bias << " smoothing " << eps);
      const OpInputs in = op_inputs(DType::f32, bias, eps, seed++);
      const OpRun a = run_op(in, true, Precision::bf16), c = run_op(in, false, Precision::bf16);
      CHECK(a.op == "linear_cross_entropy");
      CHECK(c.op == "cross_entropy");
      CHECK(a.loss.dtype() == DType::f32);
      CHECK(a.loss.dim() == 0);
      CHECK(std::abs(a.loss.item() - c.loss.item()) <= 1e-5 * std::abs(c.loss.item()));
      REQUIRE(a.dx.shape() == in.x.shape());
      REQUIRE(a.dw.shape() == in.w.shape());
      const double dx_err = rel_err(a.dx, c.dx), dw_err = rel_err(a.dw, c.dw);
      INFO("relative errors: dx " << dx_err << ", dw " << dw_err);
      CHECK(dx_err <= 1e-2);
      CHECK(dw_err <= 1e-2);
      REQUIRE(a.db.defined() == bias);
      // db: the column sums before rounding, as sum_rows of the float32 gradient
      if (bias) CHECK(rel_err(a.db, c.db) <= 1e-4);

      PrecisionScope scope(Precision::bf16);
      {  // without recording: no gradient formed, the same loss bits
        const ag::NoGrad no_grad;
        const ag::Var loss = ag::linear_cross_entropy(ag::Var(in.x), ag::Var(in.w),
                                                      in.b.defined() ? ag::Var(in.b) : ag::Var(),
                                                      in.t, in.ignore, in.eps);
        CHECK(op_of(loss) == "");
        CHECK(same_bits(loss.data(), a.loss));
      }
      {  // only x requires grad: its gradient is the same, w and b get none
        const ag::Var x(in.x, true), w(in.w), b = in.b.defined() ? ag::Var(in.b) : ag::Var();
        const ag::Var loss = ag::linear_cross_entropy(x, w, b, in.t, in.ignore, in.eps);
        CHECK(op_of(loss) == "linear_cross_entropy");
        loss.backward();
        CHECK(same_bits(x.grad(), a.dx));
        CHECK_FALSE(w.grad().defined());
      }
      {  // only w requires grad
        const ag::Var x(in.x), w(in.w, true), b = in.b.defined() ? ag::Var(in.b) : ag::Var();
        const ag::Var loss = ag::linear_cross_entropy(x, w, b, in.t, in.ignore, in.eps);
        loss.backward();
        CHECK_FALSE(x.grad().defined());
        CHECK(same_bits(w.grad(), a.dw));
        if (bias) CHECK_FALSE(b.grad().defined());
      }
    }
  }
}

TEST_CASE("ag linear_cross_entropy edge cases in bf16: float64, all ignored, bad targets") {
  SKIP_WITHOUT_BF16();
  {  // float64 in a bf16 scope: the composition, bit for bit
    const OpInputs in = op_inputs(DType::f64, true, 0.1, 31);
    const OpRun a = run_op(in, true, Precision::bf16), c = run_op(in, false, Precision::bf16);
    CHECK(a.op == "cross_entropy");
    check_same_bits(a, c);
  }
  {  // every target ignored: 0 and zero gradients, not NaN
    OpInputs in = op_inputs(DType::f32, true, 0.1, 32);
    in.t.fill_(double(in.ignore));
    const OpRun a = run_op(in, true, Precision::bf16);
    CHECK(a.op == "linear_cross_entropy");
    CHECK(a.loss.item() == 0);
    REQUIRE(a.dx.shape() == in.x.shape());
    CHECK(max_abs(a.dx) == 0);
    CHECK(max_abs(a.dw) == 0);
    CHECK(max_abs(a.db) == 0);
  }
  {  // a target out of range names the op
    OpInputs in = op_inputs(DType::f32, true, 0.1, 33);
    in.t.data<int64_t>()[5] = in.w.size(0);
    PrecisionScope scope(Precision::bf16);
    const ag::Var x(in.x, true), w(in.w, true), b(in.b, true);
    CHECK_ERROR_MENTIONS(ag::linear_cross_entropy(x, w, b, in.t, in.ignore, in.eps),
                         "linear_cross_entropy", "out of range");
  }
}

TEST_CASE("Seq2Seq forward_loss in bf16 is one op within bf16 tolerance of forward then loss") {
  SKIP_WITHOUT_BF16();
  for (const bool tied : {false, true}) {
    INFO("output tied to the target embedding: " << tied);
    Generator g(41);
    Seq2Seq m(seq2seq_config(tied), g);
    const Batch b = seq2seq_batch(42);
    const ModelRun a = run_model(m, b, true, Precision::bf16);
    const ModelRun c = run_model(m, b, false, Precision::bf16);
    CHECK(a.op == "linear_cross_entropy");
    CHECK(c.op == "cross_entropy");
    CHECK(a.grads.count("output.bias") == (tied ? 0u : 1u));
    check_models_close(a, c);
    // twice: the same bits
    check_models_same_bits(run_model(m, b, true, Precision::bf16), a);
  }
}

TEST_CASE("DecoderLM forward_loss in bf16 is one op within bf16 tolerance of forward then loss") {
  SKIP_WITHOUT_BF16();
  for (const bool tied : {true, false}) {
    INFO("head tied to the embedding: " << tied);
    Generator g(51);
    DecoderLM m(lm_config(tied), g, std::make_shared<Generator>(1));
    const Batch b = lm_batch(52);
    const ModelRun a = run_model(m, b, true, Precision::bf16);
    const ModelRun c = run_model(m, b, false, Precision::bf16);
    CHECK(a.op == "linear_cross_entropy");
    CHECK(c.op == "cross_entropy");
    check_models_close(a, c);
  }
}

TEST_CASE("forward_loss in bf16 with hooked logits or a soft cap is forward then loss bitwise") {
  SKIP_WITHOUT_BF16();
  {  // Seq2Seq, hooks capturing the logits: they must be formed
    Generator g(61);
    Seq2Seq m(seq2seq_config(false), g);
    const Batch b = seq2seq_batch(62);
    Hooks h;
    h.capture = names_matching({"logits"});
    const ModelRun a = run_model(m, b, true, Precision::bf16, &h);
    const ModelRun c = run_model(m, b, false, Precision::bf16);
    CHECK(a.op == "cross_entropy");
    REQUIRE(h.cache.count("logits") == 1);
    CHECK(h.cache.at("logits").shape() == Shape{3, 50, 131});
    check_models_same_bits(a, c);
    // the hooks gone, the fused op again
    CHECK(run_model(m, b, true, Precision::bf16).op == "linear_cross_entropy");
  }
  {  // DecoderLM, the logits replaced (by themselves): the logits path
    Generator g(63);
    DecoderLM m(lm_config(true), g, std::make_shared<Generator>(1));
    const Batch b = lm_batch(64);
    Hooks h;
    h.add("logits", [](const ag::Var& x) { return x; });
    const ModelRun a = run_model(m, b, true, Precision::bf16, &h);
    CHECK(a.op == "cross_entropy");
    check_models_same_bits(a, run_model(m, b, false, Precision::bf16));
  }
  {  // DecoderLM, hooks on every other point (training's attention patterns): still fused, and
     // the same bits as without hooks; the logits never formed, so never passed
    Generator g(63);
    DecoderLM m(lm_config(true), g, std::make_shared<Generator>(1));
    const Batch b = lm_batch(64);
    Hooks h;
    h.capture = [](std::string_view name) { return name != "logits"; };
    const ModelRun a = run_model(m, b, true, Precision::bf16, &h);
    CHECK(a.op == "linear_cross_entropy");
    CHECK(h.cache.count("blocks.0.attn.pattern") == 1);
    CHECK(std::find(h.passed.begin(), h.passed.end(), "logits") == h.passed.end());
    check_models_same_bits(a, run_model(m, b, true, Precision::bf16));
  }
  {  // a soft-capped DecoderLM: the logits are tanh's, not the output layer's
    Generator g(65);
    DecoderLM m(lm_config(true, 30.0), g, std::make_shared<Generator>(1));
    const Batch b = lm_batch(66);
    const ModelRun a = run_model(m, b, true, Precision::bf16);
    CHECK(a.op == "cross_entropy");
    check_models_same_bits(a, run_model(m, b, false, Precision::bf16));
  }
}

TEST_CASE("forward_loss outside a bf16 scope is forward then cross_entropy bit for bit") {
  {
    Generator g(71);
    Seq2Seq m(seq2seq_config(false), g);
    const Batch b = seq2seq_batch(72);
    const ModelRun a = run_model(m, b, true, Precision::fp32);
    CHECK(a.op == "cross_entropy");
    check_models_same_bits(a, run_model(m, b, false, Precision::fp32));
  }
  {
    Generator g(73);
    DecoderLM m(lm_config(true), g, std::make_shared<Generator>(1));
    const Batch b = lm_batch(74);
    const ModelRun a = run_model(m, b, true, Precision::fp32);
    CHECK(a.op == "cross_entropy");
    check_models_same_bits(a, run_model(m, b, false, Precision::fp32));
  }
}
