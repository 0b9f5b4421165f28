// What a head does, as one number per head: scores of attention patterns against the tokens
// they read. Pure functions of the weights and the token ids (no model, no autograd), so the
// same code scores a pattern captured from any attention of any model kind.
//
// The pattern scores are TransformerLens's head detector (transformer_lens/head_detector.py,
// detect_head with its defaults: error_measure = "mul", exclude_bos = False,
// exclude_current_token = False). Its docstring: '"mul" (default) multiplies both tensors
// element-wise and divides the sum of the result by the sum of the attention pattern [...] how
// big fraction of this head's attention is allocated to these specific query-key pairs?'. For
// one sequence t_0..t_{n-1}, a head's pattern A (n, n) and a 0/1 detection pattern D (n, n):
//
//   score = sum_ij A'_ij D_ij / sum_ij A'_ij
//
// where A' is A with column 0 zeroed when exclude_bos and the diagonal zeroed when
// exclude_current_token. The denominator is the head's whole mass, every query row counted,
// including rows where D is empty: query 0 has no previous token, so a perfect previous-token
// head scores (n - 1) / n under the defaults, and a perfect induction head on [bos] r r scores
// the share of rows in the second copy, L / (2L + 1); with exclude_bos (and the head resting
// on the first token where nothing fits, as trained heads do) both score 1. A list of
// sequences is scored one by one and the scores averaged (detect_head's list branch,
// torch.stack(batch_scores).mean(0)). The detection patterns (get_*_detection_pattern there):
//
//   previous_token   D_ij = 1 iff j = i - 1
//   duplicate_token  D_ij = 1 iff j < i and t_j = t_i
//   induction        D_ij = 1 iff 1 <= j <= i and t_{j-1} = t_i   (the duplicate pattern
//                    shifted one key to the right: the token after an earlier copy of t_i)
//
// Padding (probe.pad_id): a padded sequence is scored as its real prefix alone, which is what
// TransformerLens computes on the unpadded sequence.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/names.hpp"
#include "core/tensor.hpp"

namespace qkv::interp {

// One attention's weights over a batch, and the tokens on both sides.
struct AttentionProbe {
  // (B, h, n, m) float32 or float64: pattern[b, k, i, :] is query i's weights over the m keys
  // in head k of sequence b (each row sums to 1; a fully masked row is all zeros).
  Tensor pattern{};
  // (B, n) int64: the tokens at the query positions. Needed by the token scores; the others
  // read it only for the padding.
  Tensor ids{};
  // (B, m) int64: the tokens at the key positions when they are not ids (cross-attention: the
  // source); undefined for self-attention. Read only for the padding.
  Tensor key_ids{};
  // Padding token (-1: none). Padding comes after a sequence's real tokens; padded query rows
  // are left out of every score, padded key columns out of the pattern shares.
  int64_t pad_id = -1;
};

struct ScoreOptions {
  // As detect_head's keyword arguments (pattern scores of self-attention only): leave out the
  // weight on key 0, and on the query's own position, from both sums.
  bool exclude_bos = false;
  bool exclude_current_token = false;
  // alignment: also count the keys within +-window of the aligned source position.
  int64_t alignment_window = 0;
};

// Which attentions a score is meant for.
enum class ScoredAttention { self, cross, any };

// How a score's values read: a share of the head's attention mass (0..1), or nats (a row of m
// keys has at most log m).
enum class ScoreUnit { share, nats };

// The registry of head scores, one line each, in the order every consumer shows them (after
// `qkv heads`' own columns). The line makes the enum value, its name (in tables, JSON and
// errors), its kHeadScores entry (what `qkv heads`, its JSON, the server's head table, the
// page and `qkv report` read: attention, unit, format, title, description) and declares
// score_NAME, defined in interp/head_scores.cpp. A new score is its line, its function, its
// test and its row in docs/inspect.md's table of columns; nothing else lists the scores.
//
//   X(name, attention, unit, decimals, title, description)
//
// decimals: digits after the point in `qkv heads`' table and on the page's hover; title: a few
// words for captions and figure titles; description: one line for --help and the page.
// The definitions: previous_token, duplicate_token and induction are TransformerLens's (above);
// entropy is averaged over the query rows with at least one key; alignment's position is
// alignment_position's (below).
#define QKV_HEAD_SCORES(X)                                                                    \
  X(entropy, any, nats, 4, "entropy",                                                         \
    "mean entropy of a query's attention over the keys, in nats (log m at most for m keys)")  \
  X(previous_token, self, share, 4, "previous token",                                         \
    "share of attention on the previous position (TransformerLens's head detector)")          \
  X(duplicate_token, self, share, 4, "duplicate token",                                       \
    "share of attention on earlier copies of the query's token (TransformerLens)")            \
  X(induction, self, share, 4, "induction",                                                   \
    "share of attention on the token after an earlier copy of the query's (TransformerLens)") \
  X(alignment, cross, share, 4, "alignment",                                                  \
    "share of attention on the source position of the diagonal from first to last")

#define QKV_HEAD_SCORE_ENUM(name, ...) name,
enum class HeadScore { QKV_HEAD_SCORES(QKV_HEAD_SCORE_ENUM) };
#undef QKV_HEAD_SCORE_ENUM

#define QKV_HEAD_SCORE_NAME(name, ...) {#name, HeadScore::name},
inline constexpr EnumName<HeadScore> kHeadScoreNames[] = {QKV_HEAD_SCORES(QKV_HEAD_SCORE_NAME)};
#undef QKV_HEAD_SCORE_NAME
constexpr std::span<const EnumName<HeadScore>> names_of(HeadScore) { return kHeadScoreNames; }

// A registry line as data.
struct HeadScoreInfo {
  HeadScore score;
  const char* name;
  ScoredAttention attention;
  ScoreUnit unit;
  int decimals;
  const char* title;
  const char* description;
};
// clang-format off
#define QKV_HEAD_SCORE_INFO(name, attention, unit, decimals, title, description) \
  {HeadScore::name, #name, ScoredAttention::attention, ScoreUnit::unit, decimals, title, \
   description},
// clang-format on
// Every score, in the registry's order.
inline constexpr HeadScoreInfo kHeadScores[] = {QKV_HEAD_SCORES(QKV_HEAD_SCORE_INFO)};
#undef QKV_HEAD_SCORE_INFO

constexpr const HeadScoreInfo& info_of(HeadScore s) {
  return kHeadScores[static_cast<size_t>(s)];  // the enum counts the lines from 0
}
constexpr ScoredAttention attention_of(HeadScore s) { return info_of(s).attention; }
// The registry's line of a score's name; null for a name it does not have (a record of
// another version).
const HeadScoreInfo* find_head_score(std::string_view name);

// The unit as axes and captions say it ("share of attention", "nats"), and the largest value
// it allows (a share: 1; nats: none).
const char* unit_label(ScoreUnit u);
std::optional<double> unit_max(ScoreUnit u);

// Each score: one value per head (h), averaged over the batch. Throws qkv::Error naming the
// score and the shapes on a malformed probe, or when a sequence has no attention mass to share.
#define QKV_HEAD_SCORE_DECLARE(name, ...) \
  std::vector<double> score_##name(const AttentionProbe& probe, const ScoreOptions& options);
QKV_HEAD_SCORES(QKV_HEAD_SCORE_DECLARE)
#undef QKV_HEAD_SCORE_DECLARE

// The score s of every head of probe: score_NAME for s's line.
std::vector<double> head_score(HeadScore s, const AttentionProbe& probe,
                               const ScoreOptions& options = {});

// --- building blocks ---

// TransformerLens's "mul" measure (above) per sequence and head, averaged over the batch.
// detection: (B, n, m) 0/1 float64, the pattern the score looks for in each sequence (zero on
// padding). op names the score in errors.
std::vector<double> pattern_share(const AttentionProbe& probe, const Tensor& detection,
                                  const ScoreOptions& options, const char* op);

// The source position aligned with target position i of T real target tokens over S real
// source tokens: the nearest position to the diagonal from (0, 0) to (T - 1, S - 1),
//   j*(i) = round(i (S - 1) / (T - 1)), halves rounded up; j*(0) = 0 when T = 1,
// computed in integers. The diagonal is the monotone alignment prior of the alignment
// literature: fast_align's diagonal tension -|i/m - j/n| (Dyer, Chahuneau and Smith 2013, "A
// Simple, Fast, and Effective Reparameterization of IBM Model 2") and the guided attention of
// Tachibana, Uenoyama and Aihara 2018 ("Efficiently Trainable Text-to-Speech System Based on
// Deep Convolutional Networks with Guided Attention"), which penalises attention away from
// n/N = t/T. This form maps first to first and last to last.
int64_t alignment_position(int64_t i, int64_t target_length, int64_t source_length);

// Per row of probabilities p (..., m), any float dtype: the entropy -sum p log p in nats
// (0 log 0 = 0), float64 (...).
Tensor row_entropy(const Tensor& p);
// Per row of p (..., m): whether it attends anywhere (sums to more than 1/2), bool (...). A
// fully masked query's row is all zeros.
Tensor attending_rows(const Tensor& p);

}  // namespace qkv::interp
