// Inference gives the same numbers at any thread count: an InferenceScope's passes bit for bit,
// and greedy and beam decodes, fp32 and bf16. Where BLAS kernels give a row other last bits
// when its band starts elsewhere (OpenBLAS's Haswell kernels, the default on many AMD CPUs),
// this fails without the scope's thread-invariant products.
#include <catch2/catch.hpp>

#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "run/decode.hpp"
#include "run/inference.hpp"
#include "support/common.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

nn::ModelConfig small_model() {
  nn::ModelConfig c;
  c.src_vocab = c.tgt_vocab = 300;
  c.d_model = 64;
  c.heads = 4;
  c.d_ff = 128;
  c.encoder_layers = c.decoder_layers = 2;
  c.dropout = 0;
  return c;
}

// 37 sources of 3 to 21 tokens (ids 3..299: 0, 1 and 2 are <pad>, <bos> and <eos>).
std::vector<data::Ids> sources() {
  Generator g(4);
  std::vector<data::Ids> srcs;
  for (int i = 0; i < 37; ++i) {
    const Tensor ids = randint({3 + i % 19}, 3, 300, g);
    srcs.push_back(data::Ids(ids.data<int64_t>(), ids.data<int64_t>() + ids.numel()));
  }
  return srcs;
}

// The encoder's output and the decoder's logits (teacher-forced on the sources) of sources(),
// in an InferenceScope: the numbers every decode starts from, bit for bit.
std::vector<Tensor> passes(const nn::Seq2Seq& model, Precision p) {
  const nn::InferenceScope scope(model, p);
  const auto [ids, valid] = run::pad_sources(sources());
  const ag::Var memory = model.encode(ids, valid);
  return {memory.data(), model.decode(memory, valid, ids, valid).data()};
}

// Greedy and beam-5 decodes of sources() at 1, 2 and 3 threads, and the passes under them.
void check_same_at_any_thread_count(Precision p) {
  ThreadGuard guard;
  Generator g(12);
  const nn::Seq2Seq model(small_model(), g);
  const std::vector<data::Ids> srcs = sources();
  const std::vector<int64_t> max_lens(srcs.size(), 24);
  const data::Framing f{1, 2};
  std::vector<std::vector<data::Ids>> greedy, beam;
  std::vector<std::vector<Tensor>> numbers;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    numbers.push_back(passes(model, p));
    const PrecisionScope scope(p);
    greedy.push_back(run::greedy_decode(model, srcs, f, max_lens));
    beam.push_back(run::beam_decode(model, srcs, f, 5, max_lens));
  }
  for (size_t t = 1; t < 3; ++t) {
    INFO("threads " << t + 1);
    CHECK(same_bits(numbers[t][0], numbers[0][0]));  // encoder output
    CHECK(same_bits(numbers[t][1], numbers[0][1]));  // logits
  }
  for (size_t t = 1; t < 3; ++t)
    for (size_t i = 0; i < srcs.size(); ++i) {
      INFO("threads " << t + 1 << ", source " << i);
      CHECK(greedy[t][i] == greedy[0][i]);
      CHECK(beam[t][i] == beam[0][i]);
    }
}

}  // namespace

TEST_CASE("greedy and beam decoding give the same hypotheses at 1, 2 and 3 threads in fp32") {
  check_same_at_any_thread_count(Precision::fp32);
}

TEST_CASE("greedy and beam decoding give the same hypotheses at 1, 2 and 3 threads in bf16") {
  SKIP_WITHOUT_BF16();
  check_same_at_any_thread_count(Precision::bf16);
}
