#include "data/metrics.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "core/error.hpp"
#include "data/utf8.hpp"

namespace qkv::data {

namespace {

constexpr int kBleuOrder = 4;
constexpr int kChrfOrder = 6;
constexpr double kChrfBeta = 2.0;
constexpr const char* kVersion = "2.x.x";

// Python's str.split() whitespace: is_space plus the ASCII separators U+001C..U+001F.
bool python_space(char32_t c) { return is_space(c) || (c >= 0x1C && c <= 0x1F); }

// Python's str.replace(from, to): every non-overlapping occurrence, left to right.
std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = s.find(from, at)) != std::string::npos; at = hit + from.size())
    out.append(s, at, hit - at).append(to);
  return out.append(s, at, std::string::npos);
}

bool digit(char c) { return c >= '0' && c <= '9'; }

// mteval-v13a's symbol class [{-~[-` -&(-+:-@/]: split off with a space on each side.
bool symbol_13a(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

// One pass of a two-character regex substitution, as Python's re.sub scans: left to right,
// a match consumes both characters and the scan resumes after them. Byte-wise on UTF-8 is
// exact here: each pattern's anchor is an ASCII character, and a multi-byte character's last
// byte stands for the whole character in [^0-9].
template <class Match, class Emit>
std::string sub2(const std::string& s, Match match, Emit emit) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && match(s[i], s[i + 1])) {
      emit(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// Whitespace-separated tokens (Python's str.split()).
std::vector<std::string> split_ws(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  for (char32_t c : decode_utf8(s)) {
    if (python_space(c)) {
      if (!cur.empty()) out.push_back(std::move(cur)), cur.clear();
    } else {
      append_utf8(cur, c);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::string rstrip(std::string_view s) {
  std::vector<char32_t> cps = decode_utf8(s);
  while (!cps.empty() && python_space(cps.back())) cps.pop_back();
  std::string out;
  for (char32_t c : cps) append_utf8(out, c);
  return out;
}

void check_sizes(size_t hyps, size_t refs, const char* op) {
  QKV_CHECK(hyps == refs, op, hyps, " hypotheses but ", refs,
            " references: they must be line-aligned");
}

// Adds one line pair's BLEU statistics.
void add_bleu_stats(const std::vector<std::string>& h, const std::vector<std::string>& r,
                    BleuScore& s) {
  s.hyp_len += static_cast<int64_t>(h.size());
  s.ref_len += static_cast<int64_t>(r.size());
  for (int n = 1; n <= kBleuOrder; ++n) {
    std::unordered_map<std::string, int64_t> ref_counts;
    auto gram = [n](const std::vector<std::string>& t, size_t i) {
      std::string g = t[i];
      for (int k = 1; k < n; ++k) g.append(1, ' ').append(t[i + static_cast<size_t>(k)]);
      return g;
    };
    for (size_t i = 0; i + static_cast<size_t>(n) <= r.size(); ++i) ++ref_counts[gram(r, i)];
    std::unordered_map<std::string, int64_t> hyp_counts;
    for (size_t i = 0; i + static_cast<size_t>(n) <= h.size(); ++i) ++hyp_counts[gram(h, i)];
    for (const auto& [g, c] : hyp_counts) {
      s.total[n - 1] += c;
      const auto it = ref_counts.find(g);
      if (it != ref_counts.end()) s.correct[n - 1] += std::min(c, it->second);
    }
  }
}

// sacreBLEU's compute_bleu with smooth_method = "exp", effective_order = false.
void finish_bleu(BleuScore& s) {
  s.bp = s.hyp_len < s.ref_len ? (s.hyp_len > 0 ? std::exp(1.0 - static_cast<double>(s.ref_len) /
                                                                     static_cast<double>(s.hyp_len))
                                                : 0.0)
                               : 1.0;
  s.precisions.assign(kBleuOrder, 0.0);
  bool any = false;
  for (int64_t c : s.correct) any = any || c > 0;
  if (!any) {
    s.score = 0;
    return;
  }
  double smooth = 1.0, log_sum = 0;
  for (int n = 0; n < kBleuOrder; ++n) {
    if (s.total[n] == 0) {
      s.score = 0;  // sacreBLEU: log(0) = -9999999999, so the score underflows to 0
      return;
    }
    if (s.correct[n] == 0) {
      smooth *= 2;
      s.precisions[n] = 100.0 / (smooth * static_cast<double>(s.total[n]));
    } else {
      s.precisions[n] = 100.0 * static_cast<double>(s.correct[n]) / static_cast<double>(s.total[n]);
    }
    log_sum += std::log(s.precisions[n]);
  }
  s.score = s.bp * std::exp(log_sum / kBleuOrder);
}

BleuScore empty_bleu() {
  BleuScore s;
  s.correct.assign(kBleuOrder, 0);
  s.total.assign(kBleuOrder, 0);
  return s;
}

}  // namespace

std::string tokenize_13a(std::string_view line_in) {
  std::string line(line_in);
  line = replace_all(line, "<skipped>", "");
  line = replace_all(line, "-\n", "");
  line = replace_all(line, "\n", " ");
  line = replace_all(line, "&quot;", "\"");
  line = replace_all(line, "&amp;", "&");
  line = replace_all(line, "&lt;", "<");
  line = replace_all(line, "&gt;", ">");
  line = " " + line + " ";
  // ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> ' \1 '
  std::string a;
  a.reserve(line.size() * 2);
  for (char c : line) {
    if (symbol_13a(c))
      a.append(1, ' ').append(1, c).append(1, ' ');
    else
      a += c;
  }
  // ([^0-9])([\.,]) -> '\1 \2 '
  a = sub2(
      a, [](char x, char y) { return !digit(x) && (y == '.' || y == ','); },
      [](std::string& o, char x, char y) { o.append(1, x).append(1, ' ').append(1, y) += ' '; });
  // ([\.,])([^0-9]) -> ' \1 \2'
  a = sub2(
      a, [](char x, char y) { return (x == '.' || x == ',') && !digit(y); },
      [](std::string& o, char x, char y) { o.append(1, ' ').append(1, x).append(1, ' ') += y; });
  // ([0-9])(-) -> '\1 \2 '
  a = sub2(
      a, [](char x, char y) { return digit(x) && y == '-'; },
      [](std::string& o, char x, char y) { o.append(1, x).append(1, ' ').append(1, y) += ' '; });
  std::string out;
  for (const std::string& t : split_ws(a)) {
    if (!out.empty()) out += ' ';
    out += t;
  }
  return out;
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      bool lowercase) {
  check_sizes(hyps.size(), refs.size(), "corpus_bleu");
  BleuScore s = empty_bleu();
  auto prep = [lowercase](const std::string& x) {
    const std::string t = rstrip(lowercase ? to_lower_utf8(x) : x);
    return split_ws(tokenize_13a(t));
  };
  for (size_t i = 0; i < hyps.size(); ++i) add_bleu_stats(prep(hyps[i]), prep(refs[i]), s);
  finish_bleu(s);
  s.signature = std::string("nrefs:1|case:") + (lowercase ? "lc" : "mixed") +
                "|eff:no|tok:13a|smooth:exp|version:" + kVersion;
  return s;
}

BleuScore corpus_bleu_tokenized(const std::vector<std::string>& hyps,
                                const std::vector<std::string>& refs) {
  check_sizes(hyps.size(), refs.size(), "corpus_bleu_tokenized");
  BleuScore s = empty_bleu();
  for (size_t i = 0; i < hyps.size(); ++i) add_bleu_stats(split_ws(hyps[i]), split_ws(refs[i]), s);
  finish_bleu(s);
  s.signature = std::string("nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:") + kVersion;
  return s;
}

std::string BleuScore::format() const {
  char buf[256];
  const double ratio =
      ref_len > 0 ? static_cast<double>(hyp_len) / static_cast<double>(ref_len) : 0.0;
  std::snprintf(buf, sizeof buf,
                "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len "
                "= %lld)",
                score, precisions.size() > 0 ? precisions[0] : 0.0,
                precisions.size() > 1 ? precisions[1] : 0.0,
                precisions.size() > 2 ? precisions[2] : 0.0,
                precisions.size() > 3 ? precisions[3] : 0.0, bp, ratio,
                static_cast<long long>(hyp_len), static_cast<long long>(ref_len));
  return buf;
}

// ------------------------------------------------------------------ chrF

namespace {

// Per-order [hyp n-grams, ref n-grams, matches] of one line pair, added to stats.
void add_chrf_stats(const std::vector<char32_t>& h, const std::vector<char32_t>& r,
                    std::vector<int64_t>& stats) {
  for (int n = 1; n <= kChrfOrder; ++n) {
    auto grams = [n](const std::vector<char32_t>& s) {
      std::map<std::u32string, int64_t> c;
      for (size_t i = 0; i + static_cast<size_t>(n) <= s.size(); ++i)
        ++c[std::u32string(s.begin() + static_cast<std::ptrdiff_t>(i),
                           s.begin() + static_cast<std::ptrdiff_t>(i) + n)];
      return c;
    };
    const auto hc = grams(h), rc = grams(r);
    int64_t nh = 0, nr = 0, match = 0;
    for (const auto& [g, c] : hc) {
      nh += c;
      const auto it = rc.find(g);
      if (it != rc.end()) match += std::min(c, it->second);
    }
    for (const auto& [g, c] : rc) nr += c;
    stats[3 * (n - 1)] += nh;
    stats[3 * (n - 1) + 1] += nr;
    stats[3 * (n - 1) + 2] += match;
  }
}

std::vector<char32_t> chrf_chars(const std::string& s, bool lowercase) {
  std::vector<char32_t> out;
  for (char32_t c : decode_utf8(lowercase ? to_lower_utf8(s) : s))
    if (!python_space(c)) out.push_back(c);
  return out;
}

}  // namespace

ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs,
                      bool lowercase) {
  check_sizes(hyps.size(), refs.size(), "corpus_chrf");
  std::vector<int64_t> stats(3 * kChrfOrder, 0);
  for (size_t i = 0; i < hyps.size(); ++i)
    add_chrf_stats(chrf_chars(hyps[i], lowercase), chrf_chars(refs[i], lowercase), stats);
  // sacreBLEU 2.x _compute_f_score with eps_smoothing = false: average P and R over the
  // orders present on both sides, then one F-beta.
  double avg_p = 0, avg_r = 0;
  int effective = 0;
  for (int n = 0; n < kChrfOrder; ++n) {
    const auto nh = static_cast<double>(stats[3 * n]), nr = static_cast<double>(stats[3 * n + 1]),
               m = static_cast<double>(stats[3 * n + 2]);
    if (nh > 0 && nr > 0) {
      avg_p += m / nh;
      avg_r += m / nr;
      ++effective;
    }
  }
  ChrfScore s;
  if (effective > 0) avg_p /= effective, avg_r /= effective;
  const double b2 = kChrfBeta * kChrfBeta;
  s.score = avg_p + avg_r > 0 ? 100.0 * (1 + b2) * avg_p * avg_r / (b2 * avg_p + avg_r) : 0.0;
  s.signature = std::string("nrefs:1|case:") + (lowercase ? "lc" : "mixed") +
                "|eff:yes|nc:6|nw:0|space:no|version:" + kVersion;
  return s;
}

std::string ChrfScore::format() const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "chrF2 = %.2f", score);
  return buf;
}

}  // namespace qkv::data
