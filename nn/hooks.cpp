#include "nn/hooks.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/nearest.hpp"
#include "nn/model.hpp"

namespace qkv::nn {

namespace detail {
thread_local Hooks* active_hooks = nullptr;
}  // namespace detail

struct HookAccess {
  static void pass(Hooks& h, const std::string& name) {
    if (h.seen_.insert(name).second) h.passed.push_back(name);
  }
};

bool glob_match(std::string_view p, std::string_view s) {
  // Iterative wildcard match: on a mismatch, go back to the last '*' and let it eat one more.
  size_t i = 0, j = 0, star = std::string_view::npos, mark = 0;
  while (j < s.size()) {
    if (i < p.size() && p[i] == '*') {
      star = i++;
      mark = j;
    } else if (i < p.size() && p[i] == s[j]) {
      ++i;
      ++j;
    } else if (star != std::string_view::npos) {
      i = star + 1;
      j = ++mark;
    } else {
      return false;
    }
  }
  while (i < p.size() && p[i] == '*') ++i;
  return i == p.size();
}

std::function<bool(std::string_view)> names_matching(std::vector<std::string> patterns) {
  return [patterns = std::move(patterns)](std::string_view name) {
    return std::any_of(patterns.begin(), patterns.end(),
                       [&](const std::string& p) { return glob_match(p, name); });
  };
}

HookScope::HookScope(Hooks& hooks) : previous_(detail::active_hooks) {
  detail::active_hooks = &hooks;
}
HookScope::~HookScope() { detail::active_hooks = previous_; }

detail::Hooked detail::run_hook(const Var& x, const std::string& prefix, const char* name) {
  Hooks& h = *active_hooks;
  const std::string full = prefix + name;
  HookAccess::pass(h, full);
  Hooked out{x, false};
  if (const auto it = h.replace.find(full); it != h.replace.end()) {
    out.value = it->second(x);
    out.replaced = true;
    QKV_CHECK(
        out.value.defined() && out.value.shape() == x.shape() && out.value.dtype() == x.dtype(),
        "hook", full, ": the replacement must have the activation's shape ", x.shape(),
        " and dtype ", dtype_name(x.dtype()), ", got ",
        out.value.defined() ? cat(dtype_name(out.value.dtype()), " ", out.value.shape())
                            : std::string("nothing"));
  }
  if (h.capture && h.capture(full)) h.cache[full] = out.value;
  return out;
}

bool hook_wanted(const std::string& prefix, const char* name) {
  Hooks* h = detail::active_hooks;
  if (!h) return false;
  const std::string full = prefix + name;
  HookAccess::pass(*h, full);
  return h->replace.count(full) > 0 || (h->capture && h->capture(full));
}

std::vector<std::string> hook_points(const Model& model) {
  Hooks listing;  // captures nothing, replaces nothing: only records the names passed
  const Tensor one = zeros({1, 1}, DType::i64);
  const Tensor valid = ones({1, 1}, DType::b8);
  auto& m = const_cast<Model&>(model);
  const bool was = m.is_training();
  m.eval();
  try {
    ag::NoGrad no_grad;
    HookScope scope(listing);
    model.forward(one, one, valid, valid);
  } catch (...) {
    m.train(was);
    throw;
  }
  m.train(was);
  return listing.passed;
}

namespace {

// The (at most) three hook points nearest to name, by edit distance.
std::string nearest_points(const std::string& name, const std::vector<std::string>& points) {
  std::vector<std::pair<size_t, std::string>> by;
  for (const auto& p : points) by.emplace_back(edit_distance(name, p), p);
  std::stable_sort(by.begin(), by.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(3, by.size()); ++i) out += (i ? ", " : "") + by[i].second;
  return out;
}

}  // namespace

void check_hook_names(const Model& model, const std::vector<std::string>& names, const char* op) {
  if (names.empty()) return;
  const std::vector<std::string> points = hook_points(model);
  for (const std::string& n : names) {
    const bool found = std::any_of(points.begin(), points.end(),
                                   [&](const std::string& p) { return glob_match(n, p); });
    if (!found)
      throw Error(cat(op, ": no hook point '", n,
                      "' in this model; nearest: ", nearest_points(n, points), " (all ",
                      points.size(), " names: docs/hooks.md)"));
  }
}

}  // namespace qkv::nn
