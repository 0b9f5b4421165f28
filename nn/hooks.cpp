#include "nn/hooks.hpp"

#include <algorithm>
#include <cassert>

#include "core/error.hpp"
#include "core/nearest.hpp"
#include "nn/model.hpp"

namespace qkv::nn {

namespace detail {
thread_local HookScope* innermost_scope = nullptr;
}  // namespace detail

namespace {
// The outermost layer of this thread's stack: where replacements start.
thread_local HookScope* outermost_scope = nullptr;
}  // namespace

struct HookAccess {
  static void pass(Hooks& h, const std::string& name) {
    if (h.seen_.insert(name).second) h.passed.push_back(name);
  }
  static Hooks& hooks(const HookScope* s) { return s->hooks_; }
  static const HookScope* inner(const HookScope* s) { return s->inner_; }
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

HookScope::HookScope(Hooks& hooks) : hooks_(hooks), outer_(detail::innermost_scope) {
  if (outer_)
    outer_->inner_ = this;
  else
    outermost_scope = this;
  detail::innermost_scope = this;
}

HookScope::~HookScope() {
  assert(detail::innermost_scope == this && "HookScopes end in the reverse order they began");
  detail::innermost_scope = outer_;
  if (outer_)
    outer_->inner_ = nullptr;
  else
    outermost_scope = nullptr;
}

namespace {

// f(hooks) for each layer of this thread's stack, outermost first.
template <class F>
void each_layer(const F& f) {
  for (const HookScope* s = outermost_scope; s; s = HookAccess::inner(s)) f(HookAccess::hooks(s));
}

void check_replacement(const Var& before, const Var& after, const std::string& full) {
  QKV_CHECK(after.defined() && after.shape() == before.shape() && after.dtype() == before.dtype(),
            "hook", full, ": the replacement must have the activation's shape ", before.shape(),
            " and dtype ", dtype_name(before.dtype()), ", got ",
            after.defined() ? cat(dtype_name(after.dtype()), " ", after.shape())
                            : std::string("nothing"));
}

bool wanted_by(const Hooks& h, const std::string& full) {
  const auto it = h.replace.find(full);
  return (it != h.replace.end() && !it->second.empty()) || (h.capture && h.capture(full));
}

}  // namespace

detail::Hooked detail::run_hook(const Var& x, const std::string& prefix, const char* name) {
  const std::string full = prefix + name;
  Hooked out{x, false};
  each_layer([&](Hooks& h) {  // outer to inner: each layer's replacements, in order
    HookAccess::pass(h, full);
    const auto it = h.replace.find(full);
    if (it == h.replace.end()) return;
    for (const HookFn& f : it->second) {
      Var next = f(out.value);
      check_replacement(x, next, full);
      out.value = std::move(next);
      out.replaced = true;
    }
  });
  each_layer([&](Hooks& h) {  // what flows on, to every layer that asked for it
    if (h.capture && h.capture(full)) h.cache[full] = out.value;
  });
  return out;
}

bool hook_wanted(const std::string& prefix, const char* name) {
  if (!detail::innermost_scope) return false;
  const std::string full = prefix + name;
  bool wanted = false;
  each_layer([&](Hooks& h) {
    HookAccess::pass(h, full);
    wanted = wanted || wanted_by(h, full);
  });
  return wanted;
}

bool hook_requested(const std::string& name) {
  bool wanted = false;
  each_layer([&](Hooks& h) { wanted = wanted || wanted_by(h, name); });
  return wanted;
}

std::vector<std::string> hook_points(const Model& model) { return model.hook_points(); }

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
