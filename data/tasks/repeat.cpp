// repeat: a token stream in which copying from the context pays, for a language model to form
// induction heads on (Olsson et al. 2022). The stream is a run of episodes of data.block_size
// tokens; each episode draws a period L uniform in [data.min_len, data.max_len] and a segment r
// of L distinct symbols, and is r r r ... cut at block_size tokens. After the first copy of r in
// an episode, the next token is the one that followed the current token's previous occurrence
// -- an induction head's lookup -- and no fixed offset finds it, since L changes from episode to
// episode. Windows at random offsets straddle two episodes, as windows of running text straddle
// documents.
//
// The symbols are single characters (a-z, then A-Z, then 0-9: at most 62), without specials,
// so a prompt is a plain string (qkv generate --prompt "abcab"). data.train_size and
// valid_size count episodes of the training and validation streams (substreams 0 and 1 of
// data.seed); a language model has no test stream, so test_size is unused.
#include <numeric>
#include <string_view>

#include "core/random.hpp"
#include "data/task_loading.hpp"

namespace qkv::data {

namespace {

constexpr std::string_view kSymbols =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

Vocab repeat_vocab(int64_t vocab_size) {
  std::vector<std::string> symbols;
  for (int64_t k = 0; k < vocab_size; ++k)
    symbols.emplace_back(1, kSymbols[static_cast<size_t>(k)]);
  return Vocab(symbols);
}

// episodes x block tokens: each episode a segment of L distinct ids in [0, V), repeated.
Ids repeat_stream(const DataConfig& c, int64_t episodes, uint64_t seed) {
  Generator g(seed);
  Ids out;
  out.reserve(static_cast<size_t>(episodes * c.block_size));
  std::vector<int64_t> deck(static_cast<size_t>(c.vocab_size));
  for (int64_t e = 0; e < episodes; ++e) {
    const int64_t period = c.min_len + g.next_int(c.max_len - c.min_len + 1);
    std::iota(deck.begin(), deck.end(), 0);
    for (int64_t i = 0; i < period; ++i)  // partial Fisher-Yates: deck[0, period) is r
      std::swap(deck[static_cast<size_t>(i)],
                deck[static_cast<size_t>(i + g.next_int(c.vocab_size - i))]);
    for (int64_t i = 0; i < c.block_size; ++i) out.push_back(deck[static_cast<size_t>(i % period)]);
  }
  return out;
}

void check_keys(const DataConfig& c) {
  const auto most = static_cast<int64_t>(kSymbols.size());
  QKV_DATA_KEY_CHECK(c.vocab_size >= 2 && c.vocab_size <= most, "vocab_size",
                     "task repeat has 2 to ", most, " single-character symbols, got ",
                     c.vocab_size);
  QKV_DATA_KEY_CHECK(c.max_len <= c.vocab_size, "max_len", "a segment of ", c.max_len,
                     " distinct symbols needs data.vocab_size >= ", c.max_len, ", got ",
                     c.vocab_size);
  QKV_DATA_KEY_CHECK(2 * c.max_len <= c.block_size, "max_len", "a segment of up to ", c.max_len,
                     " symbols must fit twice in an episode of data.block_size = ", c.block_size,
                     " tokens, or copying never pays");
  QKV_DATA_KEY_CHECK(c.train_size >= 2, "train_size",
                     "task repeat needs >= 2 episodes (a window spans block_size + 1 tokens), got ",
                     c.train_size);
  QKV_DATA_KEY_CHECK(c.valid_size >= 2, "valid_size",
                     "task repeat needs >= 2 episodes (a window spans block_size + 1 tokens), got ",
                     c.valid_size);
}

}  // namespace

void load_task_repeat(const DataConfig& c, DataSplits& out) {
  check_keys(c);
  out.lm_train = repeat_stream(c, c.train_size, substream_seed(c.seed, 0));
  out.lm_valid = repeat_stream(c, c.valid_size, substream_seed(c.seed, 1));
  out.src_vocab = out.tgt_vocab = repeat_vocab(c.vocab_size);
  name_splits(out, "repeat");
  out.framing = Framing{-1, -1};  // no <bos> / <eos>: windows of a running stream
}

}  // namespace qkv::data
