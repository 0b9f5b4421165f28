// The model FLOPs behind qkv bench's GFLOP/s and MFU (apps/bench_models.hpp: train_flops),
// against a count by hand, product by product, of three tiny models: an encoder-decoder, a
// decoder-only GPT and one attention layer. Each term is (2 x rows x inner x cols) of one
// matrix product of the forward; a training step is three forwards (dX and dW each cost one).
#include <catch2/catch.hpp>

#include "apps/bench_models.hpp"

using qkv::app::BenchModel;
using qkv::app::train_flops;

namespace {

// d_model 4, 2 heads (d_head 2: the attention products sum over all heads' d_head = 4),
// d_ff 8, vocabulary 5, batch 2, source length 3, target length 2.
BenchModel tiny(bool seq2seq, bool gpt) {
  BenchModel m{"hand", seq2seq, 4, 2, 8, seq2seq ? 1 : 0, seq2seq || gpt ? 1 : 0, 5, 3, 2};
  m.tgt_length = seq2seq ? 2 : 0;
  m.gpt = gpt;
  return m;
}

}  // namespace

TEST_CASE("bench flops: an encoder-decoder layer pair counted by hand") {
  // encoder, 6 token rows: q, k, v, o projections 4 x (2 * 6 * 4 * 4); QK^T over 2 x 3 x 3
  // scores of width 4 and PV the same, 2 x (2 * 2 * 3 * 3 * 4); FFN 2 x (2 * 6 * 4 * 8)
  const double encoder = 4 * 192 + 2 * 144 + 2 * 384;
  // decoder self-attention, 4 rows: projections 4 x (2 * 4 * 4 * 4); QK^T and PV 2 x (2 * 2 * 2
  // * 2 * 4); cross-attention: q and o on the 4 target rows 2 x (2 * 4 * 4 * 4), k and v on the 6
  // source rows 2 x (2 * 6 * 4 * 4), QK^T and PV 2 x (2 * 2 * 2 * 3 * 4); FFN 2 x (2 * 4 * 4 * 8);
  // output layer 2 * 4 * 4 * 5
  const double decoder = 4 * 128 + 2 * 64 + 2 * 128 + 2 * 192 + 2 * 96 + 2 * 256 + 160;
  CHECK(encoder + decoder == 3968);
  CHECK(train_flops(tiny(true, false)) == 3 * 3968);
}

TEST_CASE("bench flops: a decoder-only block and its output layer counted by hand") {
  // 6 rows: projections 4 x 192, QK^T and PV 2 x 144 (the causal mask's zero half counts, as
  // MFU counts it), FFN 2 x 384, output layer 2 * 6 * 4 * 5
  const double forward = 4 * 192 + 2 * 144 + 2 * 384 + 240;
  CHECK(forward == 2064);
  CHECK(train_flops(tiny(false, true)) == 3 * forward);
}

TEST_CASE("bench flops: one attention layer counted by hand") {
  BenchModel m = tiny(false, false);
  m.d_ff = 0, m.vocab = 0;
  // projections 4 x 192, QK^T and PV 2 x 144: no FFN, no output layer
  CHECK(train_flops(m) == 3 * (4 * 192 + 2 * 144));
}

TEST_CASE("bench flops: Bahdanau's GRU encoder-decoder counted by hand") {
  // d 4 (2 units each way in the encoder), vocabulary 5, batch 2, source 3, target 2
  BenchModel m{"hand", true, 4, 1, 0, 1, 1, 5, 3, 2, 2, false, true};
  // encoder, 6 source rows, per direction: x W_ih^T (6 x 4 x 6) and h W_hh^T (6 x 2 x 6), 2 x
  // (288 + 144); the keys U_a h (6 x 4 x 4) 192; s_0 = W_s h<-_1 on 2 rows (2 x 2 x 4) 32
  const double encoder = 2 * (288 + 144) + 192 + 32;
  // decoder, 4 target rows: W_a s (4 x 4 x 4) 128; the GRU cell's input (4 x 8 x 12) 768 and
  // state (4 x 4 x 12) 384; U_o, V_o, C_o 3 x 128; W_o (4 x 2 x 5) 80; per (target, source)
  // pair, 2 x 2 x 3 of them, the score v . tanh(..) and the context, 2 x 4 each: 2 x 96
  const double decoder = 128 + 768 + 384 + 3 * 128 + 80 + 2 * 96;
  CHECK(encoder + decoder == 3024);
  CHECK(train_flops(m) == 3 * 3024);
}

TEST_CASE("bench: the bahdanau model trains through the Trainer's step") {
  const nlohmann::json j = qkv::app::run_one(qkv::app::find_model("bahdanau"), 0, false, false);
  CHECK(j.at("model") == "bahdanau");
  CHECK(j.at("steps").get<int64_t>() >= 5);
  // parameters, gradients and Adam's moments alone: 80,974 parameters x 4 floats
  CHECK(j.at("peak_tensor_mb").get<double>() > 80974.0 * 16 / (1 << 20));
  CHECK_THROWS_WITH(qkv::app::run_one(qkv::app::find_model("bahdanau"), 0, true, false),
                    Catch::Contains("--data-parallel needs a Seq2Seq model"));
}
