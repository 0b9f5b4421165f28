#include "data/classify_tasks.hpp"

#include <algorithm>
#include <optional>
#include <vector>

namespace qkv::data {

namespace {

constexpr int64_t kFirstClassifySymbol = kClsId + 1;  // after the four specials and <cls>
// dyck's type t (0 round, 1 square) opens with id 5 + 2t and closes with 6 + 2t
int64_t dyck_opener(int64_t type) { return kFirstClassifySymbol + 2 * type; }
int64_t dyck_closer(int64_t type) { return kFirstClassifySymbol + 2 * type + 1; }
bool is_dyck_opener(int64_t id) { return (id - kFirstClassifySymbol) % 2 == 0; }
int64_t bracket_type(int64_t id) { return (id - kFirstClassifySymbol) / 2; }
// parity and majority: "0" is id 5, "1" id 6
constexpr int64_t kBitOne = kFirstClassifySymbol + 1;

constexpr int64_t kMaxDyckLen = 1000;  // path counts stay within a double's range (< 2^1000)

void check_classify_options(ClassifyTask t, const ClassifyOptions& o) {
  const char* op = name_of(t).data();
  QKV_CHECK(o.min_len >= 1 && o.max_len >= o.min_len, op, "need 1 <= min_len <= max_len, got ",
            o.min_len, " and ", o.max_len);
  if (t != ClassifyTask::dyck) return;
  QKV_CHECK(o.max_depth >= 1, op, "max_depth must be >= 1, got ", o.max_depth);
  QKV_CHECK(o.max_len >= 2 && std::max<int64_t>(o.min_len, 2) <= o.max_len - o.max_len % 2, op,
            "a balanced string has an even length >= 2, and [", o.min_len, ", ", o.max_len,
            "] holds none");
  QKV_CHECK(o.max_len <= kMaxDyckLen, op, "max_len must be <= ", kMaxDyckLen, ", got ", o.max_len);
}

Example classify_example(const ClassifyOptions& o, const Ids& symbols, int64_t cls) {
  Example e;
  if (o.cls) e.src.push_back(kClsId);
  e.src.insert(e.src.end(), symbols.begin(), symbols.end());
  e.tgt = {cls};
  return e;
}

Ids uniform_bits(int64_t n, Generator& g) {
  Ids bits(static_cast<size_t>(n));
  for (int64_t& b : bits) b = kFirstClassifySymbol + g.next_int(2);
  return bits;
}

int64_t count_ones(const Ids& bits) { return std::count(bits.begin(), bits.end(), kBitOne); }

// ------------------------------------------------------------------ dyck

// Heights within [lo, hi]; touch: a height the path must reach, when set.
struct PathBand {
  int64_t lo, hi;
  std::optional<int64_t> touch;
};

// Counts of completions: f(r, h, k) = the paths of r steps from height h back to 0 within the
// band that touch band.touch (k = 1: touched already), each row scaled by its largest entry
// (sampling compares entries of one row only).
class PathCounts {
 public:
  PathCounts(int64_t n, const PathBand& b) : b_(b), width_(b.hi - b.lo + 1) {
    f_.assign(static_cast<size_t>((n + 1) * width_ * 2), 0.0);
    f_[index(0, 0, 1)] = 1;
    for (int64_t r = 1; r <= n; ++r) {
      double top = 0;
      for (int64_t h = b.lo; h <= b.hi; ++h)
        for (int k = 0; k < 2; ++k) {
          double& v = f_[index(r, h, k)];
          v = up(r, h, k) + down(r, h, k);
          top = std::max(top, v);
        }
      if (top > 0)
        for (int64_t h = b.lo; h <= b.hi; ++h)
          for (int k = 0; k < 2; ++k) f_[index(r, h, k)] /= top;
    }
  }
  int touched(int64_t h, int k) const { return k == 1 || (b_.touch && h == *b_.touch) ? 1 : 0; }
  // With r steps left at (h, k): the completions through a step up, or down.
  double up(int64_t r, int64_t h, int k) const {
    return h < b_.hi ? f_[index(r - 1, h + 1, touched(h + 1, k))] : 0;
  }
  double down(int64_t r, int64_t h, int k) const {
    return h > b_.lo ? f_[index(r - 1, h - 1, touched(h - 1, k))] : 0;
  }
  double at(int64_t r, int64_t h, int k) const { return f_[index(r, h, k)]; }

 private:
  size_t index(int64_t r, int64_t h, int k) const {
    return static_cast<size_t>((r * width_ + (h - b_.lo)) * 2 + k);
  }
  PathBand b_;
  int64_t width_;
  std::vector<double> f_;
};

// A path of n steps (+1 or -1) from height 0 back to 0, uniform among those within the band.
std::vector<int> band_path(int64_t n, const PathBand& b, Generator& g) {
  const PathCounts f(n, b);
  int64_t h = 0;
  int k = f.touched(0, b.touch ? 0 : 1);
  QKV_CHECK(f.at(n, h, k) > 0, "dyck", "no path of ", n, " steps within [", b.lo, ", ", b.hi,
            "]");  // the callers ask only for paths that exist
  std::vector<int> steps;
  steps.reserve(static_cast<size_t>(n));
  for (int64_t r = n; r > 0; --r) {
    const double u = f.up(r, h, k), d = f.down(r, h, k);
    const int step = g.next_uniform() * (u + d) < u ? 1 : -1;
    steps.push_back(step);
    h += step;
    k = f.touched(h, k);
  }
  return steps;
}

// The brackets of a path: openers of random type; a closer closes the open bracket on top, or
// takes a random type when none is open.
Ids brackets_of_path(const std::vector<int>& steps, Generator& g) {
  Ids out;
  std::vector<int64_t> open;
  for (const int s : steps) {
    if (s > 0) {
      open.push_back(g.next_int(2));
      out.push_back(dyck_opener(open.back()));
    } else if (!open.empty()) {
      out.push_back(dyck_closer(open.back()));
      open.pop_back();
    } else {
      out.push_back(dyck_closer(g.next_int(2)));
    }
  }
  return out;
}

Ids balanced_word(int64_t n, int64_t depth, Generator& g) {
  return brackets_of_path(band_path(n, {0, depth, std::nullopt}, g), g);
}

// One closer, uniformly chosen, turned into the other type's.
Ids swap_type(Ids w, Generator& g) {
  std::vector<size_t> closers;
  for (size_t i = 0; i < w.size(); ++i)
    if (!is_dyck_opener(w[i])) closers.push_back(i);
  const size_t j = closers[static_cast<size_t>(g.next_int(static_cast<int64_t>(closers.size())))];
  w[j] = dyck_closer(1 - bracket_type(w[j]));
  return w;
}

// One bracket turned around (opener <-> closer of its type), uniformly chosen among those whose
// flip keeps every height in [-1, depth + 1]; flipping the last closer always does.
Ids flip_one(Ids w, int64_t depth, Generator& g) {
  const size_t n = w.size();
  std::vector<int64_t> low(n), high(n);  // over the heights after symbols i..n-1
  int64_t h = 0;
  std::vector<int64_t> after(n);
  for (size_t i = 0; i < n; ++i) after[i] = h += is_dyck_opener(w[i]) ? 1 : -1;
  for (size_t i = n; i-- > 0;) {
    low[i] = i + 1 < n ? std::min(after[i], low[i + 1]) : after[i];
    high[i] = i + 1 < n ? std::max(after[i], high[i + 1]) : after[i];
  }
  std::vector<size_t> ok;
  for (size_t i = 0; i < n; ++i) {
    const int64_t shift = is_dyck_opener(w[i]) ? -2 : 2;
    if (low[i] + shift >= -1 && high[i] + shift <= depth + 1) ok.push_back(i);
  }
  const size_t j = ok[static_cast<size_t>(g.next_int(static_cast<int64_t>(ok.size())))];
  w[j] = is_dyck_opener(w[j]) ? dyck_closer(bracket_type(w[j])) : dyck_opener(bracket_type(w[j]));
  return w;
}

// A near miss of length n (even, >= 2) for the depth bound: see the header.
Ids near_miss(int64_t n, int64_t depth, Generator& g) {
  const int64_t kinds = n >= 2 * (depth + 1) ? 4 : 3;
  switch (g.next_int(kinds)) {
    case 0:
      return swap_type(balanced_word(n, depth, g), g);
    case 1:
      return flip_one(balanced_word(n, depth, g), depth, g);
    case 2:
      return brackets_of_path(band_path(n, {-1, depth, -1}, g), g);
    default:
      return brackets_of_path(band_path(n, {0, depth + 1, depth + 1}, g), g);
  }
}

void check_classify_symbols(ClassifyTask t, const Ids& s) {
  const int64_t last = kFirstClassifySymbol + (t == ClassifyTask::dyck ? 3 : 1);
  for (const int64_t id : s)
    QKV_CHECK(id >= kFirstClassifySymbol && id <= last, "true_class", "id ", id,
              " is no symbol of task ", name_of(t), " (ids ", kFirstClassifySymbol, " to ", last,
              ")");
}

int64_t dyck_class(const Ids& s, int64_t depth) {
  std::vector<int64_t> open;
  for (const int64_t id : s) {
    if (is_dyck_opener(id)) {
      open.push_back(bracket_type(id));
      if (static_cast<int64_t>(open.size()) > depth) return 0;
    } else {
      if (open.empty() || open.back() != bracket_type(id)) return 0;
      open.pop_back();
    }
  }
  return open.empty() ? 1 : 0;
}

}  // namespace

Vocab classify_vocab(ClassifyTask t) {
  if (t == ClassifyTask::dyck) return Vocab::with_specials({kCls, "(", ")", "[", "]"});
  return Vocab::with_specials({kCls, "0", "1"});
}

Vocab class_names(ClassifyTask t) {
  switch (t) {
    case ClassifyTask::dyck:
      return Vocab({"unbalanced", "balanced"});
    case ClassifyTask::parity:
      return Vocab({"even", "odd"});
    case ClassifyTask::majority:
      break;
  }
  return Vocab({"0", "1"});
}

int64_t true_class(ClassifyTask t, const Ids& symbols, int64_t max_depth) {
  check_classify_symbols(t, symbols);
  switch (t) {
    case ClassifyTask::dyck:
      return dyck_class(symbols, max_depth);
    case ClassifyTask::parity:
      return count_ones(symbols) % 2;
    case ClassifyTask::majority:
      break;
  }
  return 2 * count_ones(symbols) > static_cast<int64_t>(symbols.size()) ? 1 : 0;
}

Example make_dyck(const ClassifyOptions& o, Generator& g) {
  check_classify_options(ClassifyTask::dyck, o);
  const int64_t cls = g.next_int(2);
  const int64_t lo = std::max<int64_t>(o.min_len + o.min_len % 2, 2),
                hi = o.max_len - o.max_len % 2;
  const int64_t n = lo + 2 * g.next_int((hi - lo) / 2 + 1);
  return classify_example(
      o, cls == 1 ? balanced_word(n, o.max_depth, g) : near_miss(n, o.max_depth, g), cls);
}

Example make_parity(const ClassifyOptions& o, Generator& g) {
  check_classify_options(ClassifyTask::parity, o);
  const Ids bits = uniform_bits(o.min_len + g.next_int(o.max_len - o.min_len + 1), g);
  return classify_example(o, bits, count_ones(bits) % 2);
}

Example make_majority(const ClassifyOptions& o, Generator& g) {
  check_classify_options(ClassifyTask::majority, o);
  const int64_t n = o.min_len + g.next_int(o.max_len - o.min_len + 1);
  Ids bits = uniform_bits(n, g);
  while (2 * count_ones(bits) == n) bits = uniform_bits(n, g);  // a tie has no majority
  return classify_example(o, bits, 2 * count_ones(bits) > n ? 1 : 0);
}

Example make_classify_example(ClassifyTask t, const ClassifyOptions& o, Generator& g) {
  switch (t) {
    case ClassifyTask::dyck:
      return make_dyck(o, g);
    case ClassifyTask::parity:
      return make_parity(o, g);
    case ClassifyTask::majority:
      break;
  }
  return make_majority(o, g);
}

Dataset make_classify_task(ClassifyTask t, const ClassifyOptions& o, int64_t n, uint64_t seed) {
  check_classify_options(t, o);
  QKV_CHECK(n >= 0, name_of(t).data(), "negative example count ", n);
  Generator g(seed);
  Dataset ds;
  ds.name = std::string(name_of(t));
  ds.examples.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ds.examples.push_back(make_classify_example(t, o, g));
  return ds;
}

}  // namespace qkv::data
