// run/limits' memory estimate against the tensor memory one training step measures (the
// allocator's peak: parameters, gradients, Adam's moments and the step's activations), for each
// kind of encoder-decoder, the recurrent ones with their own formulas (nn/model_cost.hpp). The
// estimate promises a factor of about 2 (run/limits.hpp); the test holds it to that.
#include <catch2/catch.hpp>

#include <sstream>

#include "config/config.hpp"
#include "config/document.hpp"
#include "core/random.hpp"
#include "core/storage.hpp"
#include "nn/encoder_decoder.hpp"
#include "nn/model_cost.hpp"
#include "nn/seq2seq.hpp"
#include "optim/optimizers.hpp"
#include "run/limits.hpp"

using namespace qkv;

namespace {

// The copy task at d_model 64, batch 32, with a [model] section's extra lines.
config::RunConfig copy_config(const std::string& model, int64_t max_len) {
  std::ostringstream t;
  t << "[model]\nd_model = 64\nheads = 4\nd_ff = 128\nencoder_layers = 2\ndecoder_layers = 1\n"
       "dropout = 0.0\n"
    << model << "[data]\ntask = \"copy\"\nvocab_size = 10\nmin_len = 1\nmax_len = " << max_len
    << "\nbatch_size = 32\n";
  return config::config_from_toml(config::parse_config(t.str(), "<test_limits>"));
}

// The tensor bytes of c's model training on a full batch of the lengths the estimate assumes
// (max_len + 2 each side): the peak of the second step (Adam's moments exist from the first).
double measured_peak(const config::RunConfig& c, int64_t vocab) {
  nn::ModelConfig m = c.model;
  m.src_vocab = m.tgt_vocab = vocab;
  const size_t base = allocator_stats().live_bytes;
  Generator gen(1);
  const std::unique_ptr<nn::EncoderDecoder> model = nn::make_encoder_decoder(m, gen);
  auto opt = optim::make_optimizer(c.optim.optim, model->named_parameters());
  const int64_t B = c.data.batch_size, n = c.data.max_len + 2;
  const Tensor src = randint({B, n}, 4, vocab, gen), tgt_in = randint({B, n}, 4, vocab, gen);
  const Tensor tgt_out = randint({B * n}, 4, vocab, gen), valid = ones({B, n}, DType::b8);
  double peak = 0;
  for (int step = 0; step < 2; ++step) {
    allocator_reset_peak();
    const ag::Var loss = model->forward_loss(src, tgt_in, valid, valid, tgt_out, 0, 0.0);
    loss.backward();
    opt->step();
    opt->zero_grad();
    peak = static_cast<double>(allocator_stats().peak_live_bytes - base);
  }
  return peak;
}

}  // namespace

TEST_CASE("limits: each encoder-decoder's memory estimate is within 2x of its measured peak") {
  const std::string gru_decoder =
      "encoder = \"gru\"\ndecoder = \"gru\"\nposition = \"none\"\nscale_embedding = false\n";
  struct Case {
    std::string name, model;
    int64_t max_len;
  };
  for (const Case& k : std::vector<Case>{
           {"transformer", "", 10},
           // additive scores form tanh(q_i + k_j), d wide per (query, key) pair, in every
           // attention layer
           {"transformer, additive", "attention = \"additive\"\n", 30},
           {"gru encoder", "encoder = \"gru\"\n", 10},
           {"lstm encoder", "encoder = \"lstm\"\n", 10},
           {"conv encoder", "encoder = \"conv\"\n", 10},
           {"bahdanau", gru_decoder + "attention = \"additive\"\n", 10},
           // long sources: the alignment model's tanh(W s + U h_j), d wide per (target, source)
           // pair, is most of the step
           {"bahdanau, long", gru_decoder + "attention = \"additive\"\n", 60},
           {"gru, no attention", gru_decoder + "cross_attention = false\n", 60},
       }) {
    const config::RunConfig c = copy_config(k.model, k.max_len);
    const double estimate = run::estimate_model_memory(c, 14, 14).bytes;
    const double measured = measured_peak(c, 14);
    INFO(k.name << ": estimate " << estimate << " bytes, measured " << measured);
    CHECK(estimate >= measured / 2);
    CHECK(estimate <= measured * 2);
  }
}

TEST_CASE("limits: the recurrent encoder-decoder's layers counted as its own, not as blocks") {
  // The parameters model_cost counts against the model's, apart from the vocabulary tables
  // (embeddings, the output layer) that run/limits adds itself.
  for (const char* extra : {"", "cross_attention = false\n"}) {
    const config::RunConfig c =
        copy_config(std::string("encoder = \"gru\"\ndecoder = \"gru\"\nposition = \"none\"\n"
                                "scale_embedding = false\nattention = \"additive\"\n") +
                        extra,
                    10);
    nn::ModelConfig m = c.model;
    m.src_vocab = m.tgt_vocab = 14;
    Generator gen(1);
    const auto model = nn::make_encoder_decoder(m, gen);
    const nn::StackCost s = nn::model_cost(m);
    const double d = 64, tables = 2 * 14 * d + 14 * (s.output_in + 1);
    const double counted = s.params_d + s.params_ff + tables;
    const double actual = static_cast<double>(model->parameter_count());
    INFO(extra << "counted " << counted << ", the model has " << actual);
    CHECK(s.output_in == 32);                        // the maxout's d / 2
    CHECK(counted == Approx(actual).epsilon(0.05));  // biases and v_a left out
  }
}
