#include "run/family.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "run/families.hpp"
#include "run/inference.hpp"

namespace qkv::run {

int64_t Family::total_steps(const config::RunConfig& cfg, int64_t per_epoch) const {
  const config::TrainOptions& t = cfg.train;
  if (t.epochs == 0) return t.max_steps;  // as many epochs as max_steps takes
  return t.max_steps > 0 ? std::min(t.max_steps, t.epochs * per_epoch) : t.epochs * per_epoch;
}

// The registry: each data family (data/task_kind.hpp's TaskFamily) and the function, defined
// in that family's own file, that returns its Family. A new family is one line.
#define QKV_FAMILIES(X)        \
  X(pairs, seq2seq_family)     \
  X(lm, language_model_family) \
  X(classify, encoder_family)  \
  /* a family's line goes above */

#define QKV_FAMILY_DECLARE(family, get) const Family& get();
QKV_FAMILIES(QKV_FAMILY_DECLARE)
#undef QKV_FAMILY_DECLARE
int64_t Family::scored_output_tokens(const config::RunConfig& c, const data::Framing&, int64_t n,
                                     int64_t) const {
  return max_output_tokens(c, n);
}

// Reached only by a family listing a capability without its call: a programming error.
std::vector<data::Ids> Family::decode(const Inference& inf, const std::vector<data::Ids>&,
                                      const DecodeOptions&) const {
  throw Error(cat("decode: the family of ", inf.run().dir, " lists no decode call"));
}

void Family::generate(const Inference& inf, const data::Ids&, int64_t, const SampleOptions&,
                      Generator&, bool, const std::function<void(int64_t)>&) const {
  throw Error(cat("generate: the family of ", inf.run().dir, " lists no generate call"));
}

std::vector<Classification> Family::classify(const Inference& inf,
                                             const std::vector<data::Ids>&) const {
  throw Error(cat("classify: the family of ", inf.run().dir, " lists no classify call"));
}

void Family::check_probe_length(const config::RunConfig& c, const nn::Model& model) const {
  if (c.probe.length > 0)
    config::check_probe_length(c.probe.length, probe_room(c, model), "probe.length");
}

void Family::write_capabilities(nlohmann::json& facts) const {
  nlohmann::json names = nlohmann::json::array();
  for (const Capability c : capabilities()) names.push_back(std::string(name_of(c)));
  facts["capabilities"] = std::move(names);
}

std::unique_ptr<data::BatchSource> Family::examples_loader(const config::RunConfig& cfg,
                                                           const data::DataSplits& d, int rank,
                                                           int ranks, data::EpochData epochs) {
  data::LoaderOptions lopt = data::loader_options(cfg.data);
  lopt.shard_rank = rank;  // data-parallel: this rank's rows of every global batch
  lopt.shard_count = ranks;
  lopt.epoch_data = std::move(epochs);
  return std::make_unique<data::Loader>(std::make_shared<const data::Dataset>(d.train), d.framing,
                                        lopt, cfg.seed);
}

int64_t Family::examples_steps_per_epoch(const config::RunConfig& cfg, const data::DataSplits& d,
                                         const data::Dataset& first) {
  Generator plan_gen(cfg.seed);
  const data::LoaderOptions lopt = data::loader_options(cfg.data);
  return static_cast<int64_t>(data::plan_batches(first, d.framing, lopt.batch, plan_gen).size());
}

std::string Family::examples_split_sizes(const data::DataSplits& d) {
  return std::to_string(d.train.size()) + " train / " + std::to_string(d.valid.size()) +
         " valid examples";
}

const Family& family_for(data::TaskKind kind) {
  switch (data::family_of(kind)) {
#define QKV_FAMILY_CASE(family, get) \
  case data::TaskFamily::family:     \
    return get();
    QKV_FAMILIES(QKV_FAMILY_CASE)
#undef QKV_FAMILY_CASE
  }
  throw Error("family_for: no family for data.task \"" + std::string(name_of(kind)) + "\"");
}

}  // namespace qkv::run
