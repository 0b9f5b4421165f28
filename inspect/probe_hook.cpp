// The heads watched while the model trains (inspect/probe_hook.hpp).
#include "inspect/probe_hook.hpp"

#include <fmt/format.h>

#include "inspect/icl.hpp"
#include "inspect/site_json.hpp"
#include "run/family.hpp"
#include "run/inference.hpp"

namespace qkv::inspect {

using nlohmann::json;

namespace {

HeadTableOptions options_of(const config::ProbeOptions& p) {
  return {.split = "valid",
          .max_batches = 0,  // unused: the probe scores patterns only
          .probes = p.sequences,
          .probe_length = p.length,
          .seed = p.seed};
}

// One attention's entry: its sizes and each score as (layers) x (heads).
json entry_of(const AttentionScores& s) {
  json j = {{"layers", s.attention.layers}, {"heads", s.attention.heads}};
  for (const auto& [name, layers] : s.scores) j[name] = layers;
  return j;
}

}  // namespace

ProbeInputs probe_inputs(const config::RunConfig& c, const data::DataSplits& d,
                         const nn::Model& model) {
  ProbeInputs in{pattern_probe(c, d, model, options_of(c.probe), "probe.length"), std::nullopt};
  const run::Family& family = run::family_for(c.data.task);
  if (const data::Ids* text = family.icl_text(d))
    in.icl = icl_windows(*text, family.max_input_tokens(c, model), c.probe.icl_windows,
                         "probe.icl_windows");
  return in;
}

ProbeHook::ProbeHook(run::RunContext& c, Precision p, ProbeInputs inputs)
    : c_(c), precision_(p), inputs_(std::move(inputs)) {}

json ProbeHook::probe() {
  const auto t0 = std::chrono::steady_clock::now();
  json out;
  {
    const nn::InferenceScope scope(*c_.run.model, precision_);
    json atts = json::object();
    std::vector<Attention> sites;
    for (const AttentionScores& s :
         pattern_scores(*c_.run.model, c_.run.config, c_.run.data, inputs_.patterns)) {
      atts[s.attention.name] = entry_of(s);
      sites.push_back(s.attention);
    }
    out["attentions"] = std::move(atts);
    out["sites"] = sites_json(sites);  // their order and titles (the keys above are sorted)
    if (inputs_.icl) out["icl"] = icl_score(*c_.run.model, *inputs_.icl);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out["seconds"] = secs;
  seconds_ += secs;
  ++probes_;
  return out;
}

void ProbeHook::record(int64_t step) {
  c_.metrics.write({{"step", step}, {"probe", probe()}});
  last_step_ = step;
}

void ProbeHook::on_train_begin(train::Trainer& t) {
  t0_ = std::chrono::steady_clock::now();
  if (t.state().step == 0) record(0);  // where the curves start (a resumed run has it)
}

void ProbeHook::on_step_end(train::Trainer& t, const train::StepStats&) {
  const int64_t step = t.state().step;
  // every > 0: training/train.cpp makes no probe hook for 0 (off)
  if (step % c_.run.config.probe.every == 0 || step == t.options().total_steps) record(step);
}

void ProbeHook::on_train_end(train::Trainer& t, train::StopReason r) {
  // Early stopping ends the run before its last step: the probe of where it ended.
  if (r == train::StopReason::early_stopping && last_step_ != t.state().step)
    record(t.state().step);
  if (probes_ == 0) return;
  const double run = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  c_.say(fmt::format("probe: {} probes, {:.3f} s each, {:.1f}% of the training time", probes_,
                     seconds_ / static_cast<double>(probes_),
                     run > 0 ? 100.0 * seconds_ / run : 0.0));
}

}  // namespace qkv::inspect
