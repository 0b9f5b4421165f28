// qkv attribute RUN "input": for each output token, a score per input token and per earlier
// output token (inspect/token_attribution.hpp), as a table, --json, or --out FILE a heatmap.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "apps/commands.hpp"
#include "core/error.hpp"
#include "figures/heatmap.hpp"
#include "inspect/attribution.hpp"
#include "inspect/heads.hpp"
#include "inspect/token_attribution.hpp"
#include "run/inference.hpp"

namespace qkv::app {

namespace {

void print_table(const inspect::TokenAttribution& a) {
  std::printf("%s%s%s; rows: output tokens, columns: input tokens%s\n", a.method.c_str(),
              a.contrast.empty() ? "" : " of the logit difference against '",
              a.contrast.empty() ? "" : (a.contrast + "'").c_str(),
              a.context.empty() ? "" : " | earlier output tokens");
  if (a.steps > 0)
    std::printf("baseline: %s, %lld steps\n",
                inspect::describe(inspect::ig_baseline(a.baseline, "attribute")),
                (long long)a.steps);
  std::printf("\n%-10s", "");
  for (const auto& t : a.inputs) std::printf(" %9.9s", t.c_str());
  if (!a.context.empty()) std::printf(" |");
  for (const auto& t : a.context) std::printf(" %9.9s", t.c_str());
  std::printf("\n");
  for (size_t r = 0; r < a.scores.size(); ++r) {
    std::printf("%-10.10s", a.outputs[r].c_str());
    for (size_t j = 0; j < a.scores[r].size(); ++j) {
      if (j == a.inputs.size()) std::printf(" |");
      const bool unseen = j >= a.inputs.size() + static_cast<size_t>(a.visible[r]);
      if (unseen)
        std::printf(" %9s", "");
      else
        std::printf(" %9.4f", a.scores[r][j]);
    }
    std::printf("\n");
  }
  if (a.steps == 0) return;
  std::printf("\ncompleteness (sum of attributions against f(input) - f(baseline)):\n");
  for (size_t r = 0; r < a.scores.size(); ++r) {
    double sum = 0;
    for (const double v : a.scores[r]) sum += v;
    std::printf("%-10.10s sum %9.4f  f %9.4f - %9.4f = %9.4f  error %.2f%%\n", a.outputs[r].c_str(),
                sum, a.value[r], a.baseline_value[r], a.value[r] - a.baseline_value[r],
                100 * a.completeness_error(r));
  }
}

// Rows: output tokens; columns: input tokens, then earlier output tokens. The colour shades
// |score| from 0 to the largest; the cells print the signed score.
void write_heatmap(const inspect::TokenAttribution& a, const std::string& path) {
  figures::Heatmap hm;
  hm.title = a.method + (a.contrast.empty() ? "" : " vs '" + a.contrast + "'");
  hm.x_label = a.context.empty() ? "input token" : "input | earlier output";
  hm.y_label = "output token";
  hm.row_labels = a.outputs;
  hm.col_labels = a.inputs;
  hm.col_labels.insert(hm.col_labels.end(), a.context.begin(), a.context.end());
  hm.rows = static_cast<int64_t>(a.scores.size());
  hm.cols = static_cast<int64_t>(hm.col_labels.size());
  double top = 0;
  for (const auto& row : a.scores)
    for (const double v : row) {
      hm.values.push_back(v);
      top = std::max(top, std::abs(v));
    }
  hm.vmin = 0, hm.vmax = top > 0 ? top : 1;
  figures::write_heatmap(path, hm);
}

}  // namespace

int cmd_attribute(const AttributeArgs& a) {
  const inspect::AttributionMethod method = inspect::attribution_method(a.method, "attribute");
  QKV_CHECK(a.baseline.empty() || method == inspect::AttributionMethod::integrated_gradients,
            "attribute", "--baseline is integrated gradients' (--method integrated-gradients)");
  const inspect::IgBaseline baseline =
      inspect::ig_baseline(a.baseline.empty() ? "zero" : a.baseline, "attribute --baseline");
  const auto inf = run::open_inference(a.run_dir, {.checkpoint = a.checkpoint,
                                                   .precision = a.precision,
                                                   .threads = a.threads,
                                                   .op = "attribute"});
  const inspect::Ablation ablation(*inf, a.ablate, "attribute");  // --ablate: every pass below
  inspect::AttributionQuery q;
  q.input = inf->encode(a.text, "attribute");
  q.outputs = a.target.empty() ? inspect::default_outputs(*inf, q.input, a.tokens)
                               : inspect::output_ids(*inf, a.target, "attribute --target");
  if (!a.contrast.empty())
    q.contrast = inspect::output_token_id(*inf, a.contrast, "attribute --contrast");
  q.method = method;
  q.steps = a.steps;
  q.batch = a.batch;
  q.baseline = baseline;
  q.max_work = a.max_work;
  const inspect::TokenAttribution at = inspect::attribute_tokens(*inf, q);
  if (!a.out.empty()) write_heatmap(at, a.out);
  if (a.json)
    std::printf("%s\n", inspect::token_attribution_json(at).dump(2).c_str());
  else
    print_table(at);
  return 0;
}

}  // namespace qkv::app
