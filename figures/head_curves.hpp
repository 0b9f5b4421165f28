// Per-head curves: one small line chart per attention head, layers as rows and heads as
// columns (small multiples), of one score against training steps. What `qkv report` draws from
// the probe records a training writes ([probe] in the config; metrics.jsonl lines with a
// "probe" object), so a reader sees which head becomes what, and when.
//
//   self-attention: induction            one figure per attention and score
//        head 0   head 1   head 2
//   L0   [~~~~]   [____]   [__/‾]       every panel shares the y range, so heights compare
//   L1   [_/‾‾]   [____]   [~~~~]
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qkv::figures {

struct HeadCurves {
  std::string title;            // "self-attention: induction"
  std::string y_label;          // "share of attention", "nats"
  double y_min = 0, y_max = 1;  // the shared y range of every panel
  int64_t layers = 0, heads = 0;
  std::vector<double> steps;                // the x of every curve
  std::vector<std::vector<double>> values;  // [layer * heads + head][i], one per step
  // Optional: a link per head ([layer * heads + head]; "" none), e.g. to its attention map.
  std::vector<std::string> links;
};

// The figure as SVG: a panel of cell_width x cell_height pixels per head, with the row and
// column labels, the title, and each panel's last value printed in its corner. Throws
// qkv::Error when values does not hold layers * heads curves of steps.size() points.
std::string render_svg(const HeadCurves& c, int cell_width = 110, int cell_height = 56);

}  // namespace qkv::figures
