// qkv translate DIR [TEXT ...] [--beam N]: one output line per input (arguments or stdin lines).
#include <iostream>
#include <sstream>
#include <string>

#include "apps/commands.hpp"
#include "apps/run.hpp"
#include "core/parallel.hpp"
#include "data/tokenizer.hpp"

namespace qkv::app {

int cmd_translate(const TranslateArgs& a) {
  LoadedRun r = load_run(a.run_dir, a.checkpoint);
  set_num_threads(a.threads > 0 ? a.threads : static_cast<int>(r.config.threads));
  const data::DataConfig& dc = r.config.data;
  // Synthetic tasks are sequences of symbols separated by spaces; text tasks use the
  // run's tokenizer.
  const bool synthetic = dc.task != "dates" && dc.task != "tsv";
  const data::TokenizerKind kind = synthetic ? data::TokenizerKind::words : r.data.tokenizer;
  auto one = [&](std::string text) {
    if (dc.lowercase)
      for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    data::Ids src;
    if (synthetic) {
      std::istringstream words(text);
      std::string w;
      while (words >> w) {
        QKV_CHECK(r.data.src_vocab.contains(w), "translate", "symbol '", w,
                  "' is not in the task's vocabulary (", r.data.src_vocab.size(), " tokens, see ",
                  a.run_dir, "/src_vocab.txt)");
        src.push_back(r.data.src_vocab.id(w));
      }
    } else {
      src = data::encode(text, kind, r.data.src_vocab);
    }
    QKV_CHECK(!src.empty(), "translate", "empty input");
    const int64_t max_len = a.max_len > 0 ? a.max_len
                                          : static_cast<int64_t>(src.size()) + r.config.train.max_decode_extra;
    const data::Ids out = a.beam > 1
                              ? beam_decode(*r.model, src, r.data.framing, a.beam, max_len, a.alpha)
                              : greedy_decode(*r.model, {src}, r.data.framing, {max_len})[0];
    std::vector<std::string> toks = r.data.tgt_vocab.decode(out);
    std::string line;
    if (synthetic) {
      for (size_t i = 0; i < toks.size(); ++i) line += (i ? " " : "") + toks[i];
    } else {
      line = data::detokenize(toks);
    }
    std::cout << line << std::endl;
  };
  if (!a.texts.empty()) {
    for (const std::string& t : a.texts) one(t);
  } else {
    std::string line;
    while (std::getline(std::cin, line))
      if (!line.empty()) one(line);
  }
  return 0;
}

}  // namespace qkv::app
