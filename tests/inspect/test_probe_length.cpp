// The probe's length rule (config::check_probe_length) on an encoder-decoder with learned
// positions: the repeated rows of `qkv heads` and the training probe (inspect::pattern_probe)
// take the lengths [probe] length takes, because the model's greedy decode of the 2 L tokens
// must fit its positions too, not the input alone.
#include <catch2/catch.hpp>

#include "config/config.hpp"
#include "core/error.hpp"
#include "data/config.hpp"
#include "inspect/head_table.hpp"
#include "run/family.hpp"
#include "run/inference.hpp"
#include "support/nn.hpp"

using namespace qkv;

namespace {

// An annotated copy task's pairs (no <eos>: a greedy decode always runs to its longest) and an
// untrained tiny encoder-decoder with 20 learned positions that decodes up to 5 tokens past its
// input: 2 L + 5 + 1 <= 20, so L is at most 7.
struct LearnedPositions {
  config::RunConfig c;
  data::DataSplits d;
  std::unique_ptr<nn::Model> model;
  LearnedPositions() {
    c.data.task = data::TaskKind::annotated_copy;
    c.data.vocab_size = 8;
    c.data.train_size = 8, c.data.valid_size = 4, c.data.test_size = 4;
    d = data::load_data(c.data);
    c.model = testing::tiny_config(true);
    c.model.src_vocab = d.src_vocab.size();
    c.model.tgt_vocab = d.tgt_vocab.size();
    c.model.position = nn::PositionKind::learned;
    c.model.max_len = 20;
    c.train.max_decode_extra = 5;
    Generator g(3);
    model = run::family_for(c.data.task).make_model(c.model, g);
  }
  inspect::PatternProbe probe(int64_t length) const {
    return inspect::pattern_probe(c, d, *model, {.probes = 2, .probe_length = length, .seed = 1},
                                  "probe.length");
  }
};

}  // namespace

TEST_CASE("probe length: an encoder-decoder's decode of the probe must fit its positions") {
  LearnedPositions m;
  CHECK(config::longest_probe_length({20, "model.max_len", 5}) == 7);
  CHECK(m.probe(0).length == 7);  // automatic: the longest that fits
  CHECK(m.probe(7).length == 7);
  // 2 x 8 = 16 source tokens fit the 20 positions, but their decode of up to 21 does not.
  const char* says =
      "probe.length: the probe's 2 x 8 = 16 source tokens decode to up to 22 decoder positions "
      "(with <bos> and train.max_decode_extra = 5), more than model.max_len = 20 learned "
      "positions";
  CHECK_THROWS_WITH(m.probe(8), says);
  // [probe] length in the config says the same (checked by the family before a run begins).
  config::RunConfig c = m.c;
  const run::Family& family = run::family_for(c.data.task);
  c.probe.length = 8;
  CHECK_THROWS_WITH(family.check_probe_length(c, *m.model), says);
  c.probe.length = 7;
  CHECK_NOTHROW(family.check_probe_length(c, *m.model));
}

TEST_CASE("probe length: the longest probe decodes within the positions and one longer would not") {
  LearnedPositions m;
  inspect::PatternProbe p = m.probe(7);
  {
    const nn::InferenceScope scope(*m.model);
    const std::vector<inspect::AttentionScores> s = inspect::pattern_scores(*m.model, m.c, m.d, p);
    CHECK(s.size() == 3);  // encoder, decoder and cross
  }
  // Rows of 2 x 8 tokens, as the old check (2 L <= 20 alone) let through: the untrained model's
  // greedy decode runs past the position table.
  for (data::Ids& row : p.repeated) {
    data::Ids half(row.begin(), row.begin() + 7);  // r + r with r one token longer
    half.push_back(half[0]);
    row = half;
    row.insert(row.end(), half.begin(), half.end());
  }
  const nn::InferenceScope scope(*m.model);
  CHECK_THROWS_WITH(inspect::pattern_scores(*m.model, m.c, m.d, p),
                    Catch::Contains("longer than the learned table's max_len 20"));
}
