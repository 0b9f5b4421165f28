// Perplexity and bits per character (qkv eval) against a hand computation: the mean negative
// log-likelihood of every token of a stream under a small language model, each predicted
// from its window's context, summed in double from the model's own logits.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "run/lm.hpp"
#include "run/run.hpp"

using namespace qkv;
using namespace qkv::run;

TEST_CASE("perplexity: exp of the mean token NLL, bits per char its log2, by hand", "[run]") {
  nn::ModelConfig c = nn::ModelConfig::decoder_defaults();
  c.src_vocab = c.tgt_vocab = 7;
  c.d_model = 16, c.heads = 2, c.d_ff = 32, c.decoder_layers = 2, c.max_len = 8;
  c.dropout = 0;
  Generator g(3);
  nn::DecoderLM model(c, g);
  model.eval();
  data::Ids stream;
  Generator tg(9);
  for (int i = 0; i < 23; ++i) stream.push_back(static_cast<int64_t>(tg.next_u64() % 7));
  const int64_t block = 5;
  const LmLoss m = lm_loss_full(model, stream, block, 2);
  // by hand: windows at 0, 5, 10, 15 (the last 3 tokens have no full window after them)
  double nll = 0;
  int64_t tokens = 0;
  ag::NoGrad no_grad;
  for (int64_t o = 0; o + block < static_cast<int64_t>(stream.size()); o += block) {
    const data::Ids in(stream.begin() + o, stream.begin() + o + block);
    const Tensor logits = model.forward(from_vector<int64_t>(in, {1, block})).data().to(DType::f64);
    for (int64_t t = 0; t < block; ++t) {
      const std::vector<double> row = to_vector<double>(logits.select(0, 0).select(0, t));
      double mx = row[0];
      for (double v : row) mx = std::max(mx, v);
      double z = 0;
      for (double v : row) z += std::exp(v - mx);
      nll += -(row[static_cast<size_t>(stream[o + t + 1])] - mx - std::log(z));
      ++tokens;
    }
  }
  REQUIRE(m.tokens == tokens);
  CHECK(tokens == 20);
  const double loss = nll / static_cast<double>(tokens);
  CHECK(m.loss == Approx(loss).epsilon(1e-5));
  CHECK(perplexity(m.loss) == Approx(std::exp(loss)).epsilon(1e-5));
  CHECK(bits_per_token(m.loss) == Approx(loss / std::log(2.0)).epsilon(1e-5));
  // an untrained model over 7 symbols sits near uniform: perplexity near 7
  CHECK(perplexity(m.loss) > 3.5);
  CHECK(perplexity(m.loss) < 14);
  CHECK(perplexity(0.0) == 1.0);
  CHECK(bits_per_token(std::log(4.0)) == Approx(2.0));
}
