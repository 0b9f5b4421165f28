// qkv score REF HYP [--lowercase] [--json]: corpus BLEU and chrF of two line-aligned text
// files (plain or .gz), computed as sacreBLEU 2.x does by default (data/metrics.hpp).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "data/metrics.hpp"
#include "data/parallel.hpp"

namespace qkv::app {

int cmd_score(const ScoreArgs& a) {
  const std::vector<std::string> refs = data::read_lines(a.ref);
  const std::vector<std::string> hyps = data::read_lines(a.hyp);
  QKV_CHECK(refs.size() == hyps.size(), "score", a.ref, " has ", refs.size(), " lines but ", a.hyp,
            " has ", hyps.size(), ": they must be line-aligned");
  const data::BleuScore bleu = data::corpus_bleu(hyps, refs, a.lowercase);
  const data::ChrfScore chrf = data::corpus_chrf(hyps, refs, a.lowercase);
  if (a.json) {
    const nlohmann::json j = {{"bleu", bleu.score},
                              {"bleu_signature", bleu.signature},
                              {"bleu_detail", bleu.format()},
                              {"chrf", chrf.score},
                              {"chrf_signature", chrf.signature},
                              {"sentences", hyps.size()},
                              {"metrics_implementation", data::kMetricsImplementation}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("BLEU|%s = %s\n", bleu.signature.c_str(), bleu.format().substr(7).c_str());
  std::printf("chrF2|%s = %.2f\n", chrf.signature.c_str(), chrf.score);
  std::printf("(%s; %zu sentences)\n", data::kMetricsImplementation, hyps.size());
  return 0;
}

}  // namespace qkv::app
