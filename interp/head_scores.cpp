#include "interp/head_scores.hpp"

#include <functional>

namespace qkv::interp {

namespace {

// The probe's shapes: a 4-D float pattern, ids (B, n) and key_ids (B, m) int64 when given.
// square: the score compares query and key positions of one sequence (self-attention).
void check_probe(const AttentionProbe& p, const char* op, bool needs_ids, bool square) {
  QKV_CHECK(p.pattern.defined() && p.pattern.dim() == 4 && is_floating(p.pattern.dtype()), op,
            "expects a (B, h, n, m) float32 or float64 attention pattern, got ",
            p.pattern.defined() ? p.pattern.shape() : Shape{});
  const Shape& s = p.pattern.shape();
  QKV_CHECK(s[0] > 0 && s[1] > 0 && s[2] > 0 && s[3] > 0, op, "the pattern ", s, " is empty");
  QKV_CHECK(!square || s[2] == s[3], op, "a self-attention score expects a square pattern, got ",
            s);
  QKV_CHECK(!needs_ids || p.ids.defined(), op, "needs the token ids of the pattern ", s);
  QKV_CHECK(p.pad_id < 0 || p.ids.defined(), op, "pad_id ", p.pad_id,
            " is set but the probe has no token ids");
  if (p.ids.defined())
    QKV_CHECK(p.ids.dtype() == DType::i64 && p.ids.shape() == Shape({s[0], s[2]}), op,
              "expects ids (B, n) = ", Shape({s[0], s[2]}), " int64 for the pattern ", s, ", got ",
              p.ids.shape(), " ", dtype_name(p.ids.dtype()));
  if (p.key_ids.defined())
    QKV_CHECK(p.key_ids.dtype() == DType::i64 && p.key_ids.shape() == Shape({s[0], s[3]}), op,
              "expects key_ids (B, m) = ", Shape({s[0], s[3]}), " int64 for the pattern ", s,
              ", got ", p.key_ids.shape(), " ", dtype_name(p.key_ids.dtype()));
}

// The number of real tokens of each row of ids (B, n): all n without a pad id, else the
// tokens before the first pad, which must end the row.
std::vector<int64_t> real_lengths(const Tensor& ids, int64_t pad_id, int64_t n, int64_t batch,
                                  const char* op) {
  if (pad_id < 0 || !ids.defined()) return std::vector<int64_t>(batch, n);
  const Tensor c = ids.contiguous();
  const int64_t* t = c.data<int64_t>();
  std::vector<int64_t> out(batch, n);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t* row = t + b * n;
    int64_t len = 0;
    while (len < n && row[len] != pad_id) ++len;
    for (int64_t i = len; i < n; ++i)
      QKV_CHECK(row[i] == pad_id, op, "padding must end a sequence: sequence ", b, " has token ",
                row[i], " at position ", i, " after the pad id ", pad_id, " at ", len);
    out[b] = len;
  }
  return out;
}

std::vector<int64_t> query_lengths(const AttentionProbe& p, const char* op) {
  return real_lengths(p.ids, p.pad_id, p.pattern.size(2), p.pattern.size(0), op);
}

// Self-attention keys are the queries; cross-attention keys have ids of their own.
std::vector<int64_t> key_lengths(const AttentionProbe& p, const char* op) {
  const Tensor& keys = p.key_ids.defined() ? p.key_ids : p.ids;
  if (!p.key_ids.defined() && p.pattern.size(2) != p.pattern.size(3))
    return std::vector<int64_t>(p.pattern.size(0), p.pattern.size(3));
  return real_lengths(keys, p.pad_id, p.pattern.size(3), p.pattern.size(0), op);
}

// A (B, n, m) float64 detection pattern with D[b, i, j] = rule(b, i, j) over the real query
// rows and key columns of each sequence, zero on padding.
Tensor build_detection(const AttentionProbe& p, const char* op,
                       const std::function<bool(int64_t b, int64_t i, int64_t j)>& rule) {
  const int64_t batch = p.pattern.size(0), n = p.pattern.size(2), m = p.pattern.size(3);
  const std::vector<int64_t> tq = query_lengths(p, op), tk = key_lengths(p, op);
  Tensor d = zeros({batch, n, m}, DType::f64);
  double* out = d.data<double>();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < tq[b]; ++i)
      for (int64_t j = 0; j < tk[b]; ++j) out[(b * n + i) * m + j] = rule(b, i, j) ? 1.0 : 0.0;
  return d;
}

// token(b, i): the query-side token at position i of sequence b (ids packed row-major).
struct Tokens {
  Tensor packed;
  int64_t n;
  int64_t operator()(int64_t b, int64_t i) const { return packed.data<int64_t>()[b * n + i]; }
};
Tokens tokens_of(const AttentionProbe& p) { return {p.ids.contiguous(), p.ids.size(1)}; }

}  // namespace

std::vector<double> pattern_share(const AttentionProbe& probe, const Tensor& detection,
                                  const ScoreOptions& options, const char* op) {
  check_probe(probe, op, false, false);
  const int64_t batch = probe.pattern.size(0), heads = probe.pattern.size(1);
  const int64_t n = probe.pattern.size(2), m = probe.pattern.size(3);
  QKV_CHECK(detection.dtype() == DType::f64 && detection.shape() == Shape({batch, n, m}), op,
            "expects a (B, n, m) = ", Shape({batch, n, m}), " float64 detection pattern, got ",
            detection.shape());
  const std::vector<int64_t> tq = query_lengths(probe, op), tk = key_lengths(probe, op);
  const Tensor a = probe.pattern.to(DType::f64).contiguous(), d = detection.contiguous();
  const double *pa = a.data<double>(), *pd = d.data<double>();
  std::vector<double> out(heads, 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      double on = 0, all = 0;  // the mass on the detection pattern, and the whole mass
      for (int64_t i = 0; i < tq[b]; ++i)
        for (int64_t j = 0; j < tk[b]; ++j) {
          if ((options.exclude_bos && j == 0) || (options.exclude_current_token && j == i))
            continue;
          const double w = pa[((b * heads + h) * n + i) * m + j];
          on += w * pd[(b * n + i) * m + j];
          all += w;
        }
      QKV_CHECK(all > 0, op, "head ", h, " of sequence ", b, " has no attention mass to score in ",
                probe.pattern.shape());
      out[h] += on / all / static_cast<double>(batch);
    }
  return out;
}

std::vector<double> score_previous_token(const AttentionProbe& p, const ScoreOptions& o) {
  check_probe(p, "previous_token", false, true);
  return pattern_share(p,
                       build_detection(p, "previous_token",
                                       [](int64_t, int64_t i, int64_t j) { return j == i - 1; }),
                       o, "previous_token");
}

std::vector<double> score_duplicate_token(const AttentionProbe& p, const ScoreOptions& o) {
  check_probe(p, "duplicate_token", true, true);
  const Tokens t = tokens_of(p);
  const auto rule = [&t](int64_t b, int64_t i, int64_t j) { return j < i && t(b, j) == t(b, i); };
  return pattern_share(p, build_detection(p, "duplicate_token", rule), o, "duplicate_token");
}

std::vector<double> score_induction(const AttentionProbe& p, const ScoreOptions& o) {
  check_probe(p, "induction", true, true);
  const Tokens t = tokens_of(p);
  const auto rule = [&t](int64_t b, int64_t i, int64_t j) {
    return 1 <= j && j <= i && t(b, j - 1) == t(b, i);
  };
  return pattern_share(p, build_detection(p, "induction", rule), o, "induction");
}

int64_t alignment_position(int64_t i, int64_t target_length, int64_t source_length) {
  QKV_CHECK(target_length > 0 && source_length > 0 && i >= 0 && i < target_length,
            "alignment_position", "needs 0 <= i < T and S > 0, got i ", i, ", T ", target_length,
            ", S ", source_length);
  if (target_length == 1) return 0;
  // round(i (S-1) / (T-1)) with halves up = floor((2 i (S-1) + (T-1)) / (2 (T-1))), all >= 0
  return (2 * i * (source_length - 1) + target_length - 1) / (2 * (target_length - 1));
}

std::vector<double> score_alignment(const AttentionProbe& p, const ScoreOptions& o) {
  const char* op = "alignment";
  check_probe(p, op, false, false);
  // a square cross-attention would otherwise take the target's padding for the source's
  QKV_CHECK(p.pad_id < 0 || p.key_ids.defined(), op,
            "needs the source's key_ids to find its padding (pad_id ", p.pad_id, ")");
  QKV_CHECK(o.alignment_window >= 0, op, "the window must be >= 0, got ", o.alignment_window);
  const std::vector<int64_t> tq = query_lengths(p, op), tk = key_lengths(p, op);
  const auto rule = [&](int64_t b, int64_t i, int64_t j) {
    const int64_t centre = alignment_position(i, tq[b], tk[b]);
    return j >= centre - o.alignment_window && j <= centre + o.alignment_window;
  };
  // the exclusions of the self-attention scores do not apply to source positions
  return pattern_share(p, build_detection(p, op, rule), ScoreOptions{}, op);
}

Tensor row_entropy(const Tensor& p) {
  const Tensor q = p.to(DType::f64);
  const Tensor plogp = where(gt(q, 0.0), mul(q, log(maximum(q, 1e-300))), zeros({}, DType::f64));
  return neg(sum(plogp, {-1}));
}

Tensor attending_rows(const Tensor& p) { return gt(sum(p.to(DType::f64), {-1}), 0.5); }

std::vector<double> score_entropy(const AttentionProbe& p, const ScoreOptions&) {
  const char* op = "entropy";
  check_probe(p, op, false, false);
  const int64_t batch = p.pattern.size(0), n = p.pattern.size(2);
  Tensor live = attending_rows(p.pattern);  // (B, h, n)
  if (p.pad_id >= 0) {
    const std::vector<int64_t> tq = query_lengths(p, op);
    Tensor real = zeros({batch, 1, n}, DType::b8);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < tq[b]; ++i) real.data<uint8_t>()[b * n + i] = 1;
    live = logical_and(live, real);
  }
  const Tensor total = sum(where(live, row_entropy(p.pattern), zeros({}, DType::f64)), {0, 2});
  const Tensor rows = sum(live.to(DType::f64), {0, 2});
  std::vector<double> out = to_vector<double>(total);
  const std::vector<double> count = to_vector<double>(rows);
  for (size_t h = 0; h < out.size(); ++h) {
    QKV_CHECK(count[h] > 0, op, "head ", h, " has no query row with a key in ", p.pattern.shape());
    out[h] /= count[h];
  }
  return out;
}

const HeadScoreInfo* find_head_score(std::string_view name) {
  for (const HeadScoreInfo& i : kHeadScores)
    if (name == i.name) return &i;
  return nullptr;
}

const char* unit_label(ScoreUnit u) {
  return u == ScoreUnit::share ? "share of attention" : "nats";
}

std::optional<double> unit_max(ScoreUnit u) {
  if (u == ScoreUnit::share) return 1.0;
  return std::nullopt;
}

std::vector<double> head_score(HeadScore s, const AttentionProbe& probe,
                               const ScoreOptions& options) {
  switch (s) {
#define QKV_HEAD_SCORE_CALL(name, ...) \
  case HeadScore::name:                \
    return score_##name(probe, options);
    QKV_HEAD_SCORES(QKV_HEAD_SCORE_CALL)
#undef QKV_HEAD_SCORE_CALL
  }
  throw Error("head_score: unknown score");
}

}  // namespace qkv::interp
