// Beam search (run.hpp), for B sources at once: B * beam decoder rows a step.
#include <algorithm>
#include <cmath>

#include "core/cancel.hpp"
#include "nn/inference_scope.hpp"
#include "run/decode.hpp"
#include "run/run.hpp"

namespace qkv::run {

namespace {

struct Hyp {
  data::Ids ids;
  double logp;
};

struct Cand {
  double score;
  int64_t from, token;
};

// One source's search: its live and finished hypotheses.
struct Search {
  std::vector<Hyp> live = {{{}, 0.0}};
  std::vector<Hyp> finished;
  bool done = false;
};

// The best `keep` tokens of one row of log-probabilities (never <bos> or <pad>): higher score
// first, ties to the lower token id.
void top_tokens(const float* lp, int64_t v, double base, int64_t from, int64_t keep,
                const data::Framing& f, std::vector<Cand>& out) {
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(v));
  for (int64_t t = 0; t < v; ++t)
    if (t != f.bos && t != 0) idx.push_back(t);
  auto better = [lp](int64_t a, int64_t b) { return lp[a] > lp[b] || (lp[a] == lp[b] && a < b); };
  const auto k = std::min<int64_t>(keep, static_cast<int64_t>(idx.size()));
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), better);
  for (int64_t i = 0; i < k; ++i)
    out.push_back({base + static_cast<double>(lp[idx[i]]), from, idx[i]});
}

// Advances one source by a step's candidates; returns, for each of its
// `beam` rows, the row (within the source) whose history it continues. As in fairseq, a
// hypothesis ends only where its <eos> ranks among the step's best `beam` candidates: an <eos>
// ranked below would end the search early on a poor hypothesis.
std::vector<int64_t> advance(Search& s, std::vector<Cand>& cands, int64_t beam, int64_t max_len,
                             const data::Framing& f) {
  std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.from != b.from ? a.from < b.from : a.token < b.token;
  });
  std::vector<Hyp> next;
  std::vector<int64_t> rows;
  for (size_t rank = 0; rank < cands.size(); ++rank) {
    const Cand& c = cands[rank];
    if (static_cast<int64_t>(next.size()) >= beam) break;
    Hyp h{s.live[static_cast<size_t>(c.from)].ids, c.score};
    if (f.eos >= 0 && c.token == f.eos) {
      if (static_cast<int64_t>(rank) < beam) s.finished.push_back(h);
      continue;
    }
    h.ids.push_back(c.token);
    if (f.eos < 0 && static_cast<int64_t>(h.ids.size()) >= max_len) {
      s.finished.push_back(h);
      continue;
    }
    next.push_back(h);
    rows.push_back(c.from);
  }
  if (static_cast<int64_t>(s.finished.size()) >= beam) {
    s.done = true;
    return {};
  }
  s.live = std::move(next);
  if (s.live.empty()) s.done = true;
  return rows;
}

// The output of a stopped search. Once `beam` hypotheses have ended the live ones, which still
// lack tokens and their <eos>, do not compete: a shorter prefix always has the higher
// log-probability, so they would win. Only a search cut by its length limit lets them compete.
data::Ids best_of(Search& s, int64_t beam, double alpha, const data::Framing& f) {
  if (static_cast<int64_t>(s.finished.size()) < beam)
    for (const Hyp& h : s.live) s.finished.push_back(h);
  if (s.finished.empty()) return {};
  const int64_t extra = f.eos >= 0 ? 1 : 0;
  auto norm = [&](const Hyp& h) {
    const auto len = std::max<int64_t>(1, static_cast<int64_t>(h.ids.size()) + extra);
    return h.logp / std::pow(static_cast<double>(len), alpha);
  };
  const Hyp* best = &s.finished[0];
  for (const Hyp& h : s.finished)
    if (norm(h) > norm(*best)) best = &h;
  return best->ids;
}

// Both entry points' arguments: B sources with one length limit each, at least one hypothesis.
void check_beam_args(const char* op, int64_t b, int64_t beam,
                     const std::vector<int64_t>& max_lens) {
  QKV_CHECK(beam >= 1, op, "beam must be >= 1, got ", beam);
  QKV_CHECK(static_cast<int64_t>(max_lens.size()) == b, op, b, " sources but ", max_lens.size(),
            " lengths");
}

}  // namespace

std::vector<data::Ids> beam_search(int64_t b, int64_t beam, const std::vector<int64_t>& max_lens,
                                   double alpha, const data::Framing& f, const BeamStep& step,
                                   const BeamReorder& reorder) {
  check_beam_args("beam_search", b, beam, max_lens);
  if (b == 0) return {};
  std::vector<Search> search(static_cast<size_t>(b));
  const int64_t longest = *std::max_element(max_lens.begin(), max_lens.end());
  std::vector<int64_t> last(static_cast<size_t>(b * beam), f.bos), order(last.size());
  for (int64_t t = 0; t < longest; ++t) {
    cancellation_point();  // each step is a pass
    bool any = false;
    for (int64_t i = 0; i < b; ++i) {
      Search& s = search[static_cast<size_t>(i)];
      if (!s.done && t >= max_lens[static_cast<size_t>(i)]) s.done = true;
      any = any || !s.done;
      for (int64_t k = 0; k < beam; ++k) {  // rows beyond live.size() repeat the last live one
        const size_t r = static_cast<size_t>(i * beam + k);
        const Hyp& h = s.live[std::min<size_t>(static_cast<size_t>(k), s.live.size() - 1)];
        last[r] = s.done || h.ids.empty() ? f.bos : h.ids.back();
      }
    }
    if (!any) break;
    const Tensor logp = step(last).contiguous();  // (B * beam, V) float
    QKV_CHECK(logp.dim() == 2 && logp.size(0) == b * beam, "beam_search", "step gave ",
              shape_str(logp.shape()), " log-probabilities for ", b * beam, " rows");
    const int64_t v = logp.size(1);
    const float* lp = logp.data<float>();
    for (int64_t i = 0; i < b; ++i) {
      Search& s = search[static_cast<size_t>(i)];
      std::vector<int64_t> rows;
      if (!s.done) {
        std::vector<Cand> cands;
        for (size_t k = 0; k < s.live.size(); ++k)
          top_tokens(lp + (i * beam + static_cast<int64_t>(k)) * v, v, s.live[k].logp,
                     static_cast<int64_t>(k), beam + 1, f, cands);
        rows = advance(s, cands, beam, max_lens[static_cast<size_t>(i)], f);
      }
      for (int64_t k = 0; k < beam; ++k)  // a finished source keeps its rows where they are
        order[static_cast<size_t>(i * beam + k)] =
            i * beam +
            (rows.empty() ? k : rows[std::min<size_t>(static_cast<size_t>(k), rows.size() - 1)]);
    }
    reorder(order);
  }
  std::vector<data::Ids> out;
  for (Search& s : search) out.push_back(best_of(s, beam, alpha, f));
  return out;
}

std::vector<data::Ids> beam_decode(const nn::EncoderDecoder& model,
                                   const std::vector<data::Ids>& srcs, const data::Framing& f,
                                   int64_t beam, const std::vector<int64_t>& max_lens,
                                   double alpha) {
  const int64_t b = static_cast<int64_t>(srcs.size());
  check_beam_args("beam_decode", b, beam, max_lens);  // before any encoding
  if (b == 0) return {};
  const nn::InferenceScope scope(model);
  const auto [ids, valid] = pad_sources(srcs);
  // Encode each source once; its `beam` rows share the memory.
  std::vector<int64_t> rep(static_cast<size_t>(b * beam));
  for (int64_t r = 0; r < b * beam; ++r) rep[static_cast<size_t>(r)] = r / beam;
  const Tensor rep_t = from_vector(rep, {b * beam});
  const ag::Var memory(index_select(model.encode(ids, valid).data(), 0, rep_t));
  auto state = model.start_decoding(memory, index_select(valid, 0, rep_t));
  const BeamStep step = [&](const std::vector<int64_t>& last) {
    const auto rows = static_cast<int64_t>(last.size());
    return log_softmax(model.decode_step(state, from_vector(last, {rows})).data(), -1);
  };
  const BeamReorder reorder = [&](const std::vector<int64_t>& order) {
    state.reorder(from_vector(order, {static_cast<int64_t>(order.size())}));
  };
  return beam_search(b, beam, max_lens, alpha, f, step, reorder);
}

}  // namespace qkv::run
