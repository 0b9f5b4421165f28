// Beam search's bookkeeping against hand-built next-token models (run::beam_search): which
// hypotheses end, when a source's search stops, and which hypothesis it returns; then beam
// decoding through each kind of encoder-decoder (the Transformer's and Bahdanau's).
#include <catch2/catch.hpp>
#include <cmath>
#include <map>

#include "nn/encoder_decoder.hpp"
#include "nn/seq2seq.hpp"
#include "run/decode.hpp"

using namespace qkv;

namespace {

// Tokens: 0 <pad>, 1 <bos>, 2 <eos>, then 3.. words.
constexpr int64_t kEos = 2, kA = 3, kB = 4, kX = 5, kY = 6, kZ = 7, kV = 8;
const data::Framing kFraming{1, kEos};

// A Markov model over kV tokens: next-token probabilities by the last token; every token not
// listed (and every token after a last token without a row) gets a probability of about e^-30.
using Table = std::map<int64_t, std::map<int64_t, double>>;

// Row by row: the log-probabilities that `tables[r * n_tables / rows]` gives after last[r].
run::BeamStep markov(const std::vector<Table>& tables) {
  return [tables](const std::vector<int64_t>& last) {
    const auto rows = static_cast<int64_t>(last.size());
    std::vector<float> lp;
    for (int64_t r = 0; r < rows; ++r) {
      const Table& table =
          tables[static_cast<size_t>(r * static_cast<int64_t>(tables.size()) / rows)];
      const auto row = table.find(last[static_cast<size_t>(r)]);
      for (int64_t next = 0; next < kV; ++next) {
        const bool listed = row != table.end() && row->second.count(next) > 0;
        lp.push_back(listed ? static_cast<float>(std::log(row->second.at(next))) : -30.0f);
      }
    }
    return from_vector(lp, {rows, kV});
  };
}

run::BeamStep markov(const Table& table) { return markov(std::vector<Table>{table}); }

const run::BeamReorder kNoState = [](const std::vector<int64_t>&) {};

}  // namespace

TEST_CASE("beam search: once beam hypotheses have ended, an unfinished one never wins") {
  // Beam 2. Step 1 keeps "a x" (log 0.6) and "b z" and ends "b" (log 0.4 * 0.5); step 2 ends
  // "b z" (log 0.2), which fills the beam, while "a x" goes on to "a x y" (its <eos>, log 0.06,
  // ranks outside the beam). The search stops there; its best ended hypothesis is "b z"
  // (log(0.2) / 3). Ranked by its prefix's log-probability, the unfinished "a x" (log(0.6) / 3)
  // would win, though "a x" and "a x y" both end less likely than "b z".
  const Table t = {
      {1, {{kA, 0.6}, {kB, 0.4}}},    {kA, {{kX, 1.0}}},   {kB, {{kEos, 0.5}, {kZ, 0.5}}},
      {kX, {{kY, 0.9}, {kEos, 0.1}}}, {kZ, {{kEos, 1.0}}}, {kY, {{kEos, 0.01}, {kA, 0.99}}}};
  const auto out = run::beam_search(1, 2, {20}, 1.0, kFraming, markov(t), kNoState);
  REQUIRE(out.size() == 1);
  CHECK(out[0] == data::Ids{kB, kZ});
}

TEST_CASE("beam search: a search cut by its length limit returns the best cut-off hypothesis") {
  // One token allowed: "a" (no <eos> yet, log 0.99 / 2) beats the empty output (log 0.01 / 1).
  const Table t = {{1, {{kA, 0.99}, {kEos, 0.01}}}, {kA, {{kEos, 1.0}}}};
  const auto out = run::beam_search(1, 3, {1}, 1.0, kFraming, markov(t), kNoState);
  REQUIRE(out.size() == 1);
  CHECK(out[0] == data::Ids{kA});
}

TEST_CASE("beam search: the ended hypothesis with the best length-normalised score wins") {
  // Beam 3. "" ends with log 0.25 = -1.386, "a" with log(0.4 * 0.3) = -2.12, "a x" with
  // log(0.4 * 0.7 * 0.9) = -1.378 and "b y" with log(0.35 * 0.75 * 0.9) = -1.44: alpha 0 takes
  // "a x" by a hair, alpha 1 too (-0.46 against -1.06, -1.386 and -0.48). "b"'s <eos>
  // (log(0.35 * 0.25) = -2.44) ranks fourth at its step, outside the beam: it does not end.
  const Table t = {{1, {{kA, 0.4}, {kB, 0.35}, {kEos, 0.25}}},
                   {kA, {{kEos, 0.3}, {kX, 0.7}}},
                   {kB, {{kEos, 0.25}, {kY, 0.75}}},
                   {kX, {{kEos, 0.9}, {kA, 0.1}}},
                   {kY, {{kEos, 0.9}, {kB, 0.1}}}};
  for (double alpha : {0.0, 1.0}) {
    INFO("alpha " << alpha);
    const auto out = run::beam_search(1, 3, {20}, alpha, kFraming, markov(t), kNoState);
    CHECK(out[0] == data::Ids{kA, kX});
  }
}

TEST_CASE("beam search: several sources in one batch each get their own search") {
  // Source 0's rows see `t`; source 1's rows the same table with a and b swapped.
  const Table t = {{1, {{kA, 0.6}, {kB, 0.3}, {kEos, 0.1}}},
                   {kA, {{kEos, 0.9}, {kX, 0.1}}},
                   {kB, {{kEos, 0.9}, {kY, 0.1}}},
                   {kX, {{kEos, 1.0}}},
                   {kY, {{kEos, 1.0}}}};
  Table swapped = t;
  swapped[1] = {{kB, 0.6}, {kA, 0.3}, {kEos, 0.1}};
  const int64_t beam = 2;
  const run::BeamStep both = markov(std::vector<Table>{t, swapped});  // rows 0-1 and 2-3
  const auto out = run::beam_search(2, beam, {20, 20}, 1.0, kFraming, both, kNoState);
  REQUIRE(out.size() == 2);
  CHECK(out[0] == data::Ids{kA});
  CHECK(out[1] == data::Ids{kB});
}

TEST_CASE("beam search: a step of the wrong shape is an error naming it") {
  const run::BeamStep wrong = [](const std::vector<int64_t>&) { return zeros({1, kV}); };
  CHECK_THROWS_WITH(run::beam_search(1, 2, {5}, 1.0, kFraming, wrong, kNoState),
                    Catch::Contains("beam_search") && Catch::Contains("(1, 8)"));
}

// ------------------------------------------- through the models (nn::EncoderDecoder)

TEST_CASE("beam decode: any encoder-decoder, beam 1 is greedy, a batch decodes as its rows") {
  nn::ModelConfig rnn;  // Bahdanau's model and the Transformer, untrained, 9 tokens
  rnn.src_vocab = rnn.tgt_vocab = 9;
  rnn.d_model = 8;
  rnn.heads = 2;
  rnn.d_ff = 12;
  rnn.encoder_layers = rnn.decoder_layers = 1;
  rnn.dropout = 0;
  nn::ModelConfig transformer = rnn;
  rnn.encoder = nn::EncoderKind::gru;
  rnn.decoder = nn::DecoderKind::gru;
  rnn.position = nn::PositionKind::none;
  rnn.attention = nn::AttentionKind::additive;
  const std::vector<data::Ids> srcs = {{3, 4, 5, 6, 7}, {8, 3}};
  for (const nn::ModelConfig& c : {rnn, transformer}) {
    INFO(name_of(c.decoder));
    Generator g(3);
    const auto m = nn::make_encoder_decoder(c, g);
    {  // sharper next-token distributions than an untrained model's: hypotheses change rows
      Tensor w = m->output_layer().weight.data();
      w.copy_(mul(w, 8.0));
    }
    const std::vector<int64_t> lens = {6, 6};
    CHECK(run::beam_decode(*m, srcs, kFraming, 1, lens) ==
          run::greedy_decode(*m, srcs, kFraming, lens));
    // beam 3: the state's rows follow their hypotheses (DecodeState::reorder), so each source
    // decodes in the batch as alone
    const auto both = run::beam_decode(*m, srcs, kFraming, 3, lens);
    REQUIRE(both.size() == 2);
    for (size_t i = 0; i < srcs.size(); ++i)
      CHECK(both[i] == run::beam_decode(*m, {srcs[i]}, kFraming, 3, {6})[0]);
    // ... and the same search without any state: each row's whole prefix re-read by the
    // teacher-forced decode, so a row that continued another's state would show
    const auto [ids, valid] = run::pad_sources(srcs);
    const Tensor rep = from_vector<int64_t>({0, 0, 0, 1, 1, 1}, {6});
    const ag::Var memory(index_select(m->encode(ids, valid).data(), 0, rep));
    const Tensor rows_valid = index_select(valid, 0, rep);
    std::vector<data::Ids> prefix(6);
    int64_t moved = 0;                 // rows that continued another row's hypothesis
    std::vector<Tensor> full, cached;  // each step's log-probabilities, both ways
    const run::BeamStep stateless = [&](const std::vector<int64_t>& last) {
      for (size_t r = 0; r < last.size(); ++r) prefix[r].push_back(last[r]);
      std::vector<int64_t> flat;
      for (const data::Ids& p : prefix) flat.insert(flat.end(), p.begin(), p.end());
      const auto t = static_cast<int64_t>(prefix[0].size());
      const Tensor logits =
          m->decode(memory, rows_valid, from_vector(flat, {6, t}), ones({6, t}, DType::b8)).data();
      full.push_back(log_softmax(logits.select(1, t - 1).contiguous(), -1));
      return full.back();
    };
    const run::BeamReorder follow = [&](const std::vector<int64_t>& order) {
      std::vector<data::Ids> next;
      for (size_t r = 0; r < order.size(); ++r) {
        moved += order[r] != static_cast<int64_t>(r);
        next.push_back(prefix[static_cast<size_t>(order[r])]);
      }
      prefix = next;
    };
    CHECK(run::beam_search(2, 3, lens, 1.0, kFraming, stateless, follow) == both);
    CHECK(moved > 0);
    // the model's own state, reordered with the rows, gives every step's log-probabilities
    nn::DecodeState state = m->start_decoding(memory, rows_valid);
    const run::BeamStep step = [&](const std::vector<int64_t>& last) {
      cached.push_back(
          log_softmax(m->decode_step(state, from_vector(last, {6})).data(), -1).contiguous());
      return cached.back();
    };
    const run::BeamReorder reorder = [&](const std::vector<int64_t>& order) {
      state.reorder(from_vector(order, {6}));
    };
    CHECK(run::beam_search(2, 3, lens, 1.0, kFraming, step, reorder) == both);
    REQUIRE(cached.size() == full.size());
    for (size_t t = 0; t < full.size(); ++t) CHECK(max_abs_diff(cached[t], full[t]) < 1e-5);
  }
}
