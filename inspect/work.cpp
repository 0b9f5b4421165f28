// The work of patching and of the head table, counted before it runs (inspect/work.hpp).
#include "inspect/work.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "inspect/heads.hpp"
#include "run/inference.hpp"

namespace qkv::inspect {

namespace {

int64_t heads_in(const std::vector<Attention>& atts) {
  int64_t n = 0;
  for (const Attention& a : atts) n += a.layers * a.heads;
  return n;
}

// "1.2M", "384k": a count in a message.
std::string work_count(double n) {
  return n >= 1e6   ? fmt::format("{:.1f}M", n / 1e6)
         : n >= 1e3 ? fmt::format("{:.0f}k", n / 1e3)
                    : fmt::format("{:.0f}", n);
}

}  // namespace

void check_work(const Work& w, int64_t bound, const std::string& op, const std::string& how) {
  if (w.token_passes <= static_cast<double>(bound)) return;
  throw Error(fmt::format("{}: {}: {} token passes, more than the bound of {} ({})", op, w.what,
                          work_count(w.token_passes), work_count(static_cast<double>(bound)), how));
}

Work patch_work(const run::Inference& inf, int64_t n) {
  const std::vector<Attention> atts = attentions_of(inf);
  const int64_t tokens = inf.inspection_tokens(n);
  const int64_t passes = 4 + heads_in(atts) + atts.front().layers * n;
  return {static_cast<double>(passes) * static_cast<double>(tokens),
          fmt::format("{} passes of {} tokens", passes, tokens)};
}

Work head_table_work(const run::Inference& inf, const HeadTableOptions& o) {
  const std::vector<Attention> atts = attentions_of(inf);
  const int64_t heads = heads_in(atts);
  const double split =
      static_cast<double>(inf.pass_tokens({.split = o.split, .max_batches = o.max_batches}));
  const int64_t L = o.probe_length > 0 ? o.probe_length : 16;
  // repeated rows of 2 L inspected, and as many split examples when an attention reads another
  // sequence (cross-attention's alignment)
  const bool cross =
      std::any_of(atts.begin(), atts.end(), [](const Attention& a) { return a.cross(); });
  const double probe = static_cast<double>(o.probes) * (cross ? 2.0 : 1.0) *
                       static_cast<double>(inf.inspection_tokens(2 * L));
  const double passes = static_cast<double>(5 + 2 * heads);
  return {passes * split + probe,
          fmt::format("{} passes over {} of the {} split ({} tokens) for {} heads, and {} probe "
                      "sequences",
                      5 + 2 * heads,
                      o.max_batches > 0 ? fmt::format("{} batches", o.max_batches)
                                        : std::string("every batch"),
                      o.split, static_cast<int64_t>(split), heads, o.probes)};
}

int64_t head_table_batches(const run::Inference& inf, HeadTableOptions o, int64_t asked,
                           int64_t bound, const std::string& op, const std::string& how) {
  if (asked >= 0) {
    o.max_batches = asked;
    check_work(head_table_work(inf, o), bound, op, how);
    return asked;
  }
  for (int64_t b = kDefaultHeadBatches; b > 1; --b) {
    o.max_batches = b;
    if (head_table_work(inf, o).token_passes <= static_cast<double>(bound)) return b;
  }
  o.max_batches = 1;
  check_work(head_table_work(inf, o), bound, op, how);
  return 1;
}

}  // namespace qkv::inspect
