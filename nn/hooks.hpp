// Named activations: every activation a model passes through has a stable name (a hook point),
// and a forward pass can capture it or replace it -- TransformerLens's HookPoint, run_with_cache
// and run_with_hooks. The table of names, with shapes, is docs/hooks.md (checked by a test);
// nn::hook_points(model) lists a model's names without running it.
//
// Hooks are a stack per thread. A HookScope pushes one layer (an nn::Hooks) for the passes this
// thread runs until it ends; an inner scope adds to the outer ones instead of hiding them:
//   - replace: at a hook point the replacements of every layer apply, outer layer first, and
//     within a layer in the order they were added; the value after all of them flows on;
//   - capture: each layer whose filter takes the name stores that final value in its own cache
//     (a layer never receives what another layer asked for); `passed` is per layer too.
// So an ablation installed around a call (`--ablate`) composes with whatever the call adds
// inside (a capture, a patch, a head-importance mask) without anyone copying it.
//
// Cost: with no HookScope on this thread a hook point is one thread-local pointer test, so
// training and decoding compute the same bits with or without this file. Capturing or replacing
// an attention pattern makes that layer also form its (n x m) weights; only a hooked `logits`
// makes the training loss form the logits (nn::Model::forward_loss).
//
// Threads: hooks are per thread (no layer is shared between threads), and the kernels' worker
// threads never run modules. A Hooks object itself is not synchronised: one thread's scopes.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/ops.hpp"

namespace qkv::nn {

using ag::Var;
class Model;

// Receives an activation and returns the one that flows on: same shape and dtype (checked).
// The gradient flows through what it returns, so a hook may scale by a Var that requires grad.
using HookFn = std::function<Var(const Var& activation)>;

// One layer of hooks: what the forward passes in its HookScope do at their hook points.
struct Hooks {
  // Capture: a hook point whose name passes the filter is stored in `cache` under its name, as
  // it flows on (after the replacements of every layer in scope). A name passed again (one pass
  // per decoded token) keeps the last. An empty filter captures nothing.
  std::function<bool(std::string_view name)> capture;
  std::map<std::string, Var> cache;
  // Replace: at the hook point of exactly this name, each function in turn (the first gets the
  // activation, each next one what the previous returned).
  std::map<std::string, std::vector<HookFn>> replace;
  // Appends f to the replacements of the hook point `name`.
  Hooks& add(const std::string& name, HookFn f) {
    replace[name].push_back(std::move(f));
    return *this;
  }
  // Every hook point passed while this layer was in scope, in the order first passed.
  std::vector<std::string> passed;

 private:
  friend struct HookAccess;
  std::set<std::string> seen_;
};

// A capture filter from glob patterns ('*' matches any run of characters, e.g. "*.attn.pattern",
// "blocks.2.*"); a name passes when any pattern matches it.
std::function<bool(std::string_view)> names_matching(std::vector<std::string> patterns);
bool glob_match(std::string_view pattern, std::string_view name);

// Pushes hooks as the innermost layer of this thread's stack until destroyed. Scopes end in the
// reverse order they began (as RAII objects on one thread's stack do). The Hooks must outlive
// the scope.
class HookScope {
 public:
  explicit HookScope(Hooks& hooks);
  ~HookScope();
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;

 private:
  friend struct HookAccess;
  Hooks& hooks_;
  HookScope* outer_;            // the layer below (null: this is the outermost)
  HookScope* inner_ = nullptr;  // the layer above (null: this is the innermost)
};

namespace detail {
extern thread_local HookScope* innermost_scope;
struct Hooked {
  Var value;
  bool replaced = false;  // some layer replaced it
};
Hooked run_hook(const Var& x, const std::string& prefix, const char* name);
}  // namespace detail

inline bool hooks_active() { return detail::innermost_scope != nullptr; }

// The hook point prefix + name on x: x itself when no hooks are in scope.
inline Var hook_point(const Var& x, const std::string& prefix, const char* name) {
  if (!detail::innermost_scope) return x;
  return detail::run_hook(x, prefix, name).value;
}
// A model-level hook point ("logits", "encoder.embed"): the name whole.
inline Var hook_point(const Var& x, const char* name) {
  if (!detail::innermost_scope) return x;
  static const std::string none;
  return detail::run_hook(x, none, name).value;
}
// For an activation that costs something to form (an attention pattern): true when some layer
// in scope captures or replaces the hook point prefix + name. Marks it passed in every layer.
// False when no hooks are in scope.
bool hook_wanted(const std::string& prefix, const char* name);
// Whether some layer in scope captures or replaces `name`, without passing it: for a pass that
// forms the activation only when asked (the training loss and "logits").
bool hook_requested(const std::string& name);

// Every hook point of the model, in the order a forward pass reaches them (a teacher-forced
// pass; incremental decoding passes the same names). Known at construction: no pass runs.
std::vector<std::string> hook_points(const Model& model);

// Throws qkv::Error naming op when a name (exact, or a glob pattern) matches no hook point of
// the model; the message lists the nearest names.
void check_hook_names(const Model& model, const std::vector<std::string>& names, const char* op);

}  // namespace qkv::nn
