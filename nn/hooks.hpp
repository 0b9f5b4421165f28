// Named activations: every activation a model passes through has a stable name (a hook point),
// and a forward pass can capture it or replace it -- TransformerLens's HookPoint, run_with_cache
// and run_with_hooks. The table of names, with shapes, is docs/hooks.md.
//
// Names (l counts layers from 0; an encoder-decoder prefixes "encoder." or "decoder."):
//   embed                     (B, n, d)        token embeddings (scaled), before positions
//   blocks.l.resid_pre        (B, n, d)        the block's input
//   blocks.l.attn.q/k/v       (B, h, n|m, d_head) after the projections (QK-norm, rope)
//   blocks.l.attn.pattern     (B, h, n, m)     the attention weights
//   blocks.l.attn.z           (B, h, n, d_head) each head's weighted values, before W_O
//   blocks.l.attn_out         (B, n, d)        what self-attention adds to the residual
//   blocks.l.resid_mid        (B, n, d)        after self-attention (post-LN: normalised)
//   decoder.blocks.l.cross.*  as attn.*, cross-attention (keys: the encoder's output)
//   decoder.blocks.l.cross_out, decoder.blocks.l.resid_cross   likewise, after cross-attention
//   blocks.l.mlp.pre/post     (B, n, d_ff)     the FFN before and after its activation
//   blocks.l.mlp_out          (B, n, d)        what the FFN adds to the residual
//   blocks.l.resid_post       (B, n, d)        the block's output
//   final_norm                (B, n, d)        the stack's final norm (when it has one)
//   logits                    (B, n, V)
// In incremental decoding (KV cache) a pass covers only the new positions: n is 1, m grows.
//
// Cost: with no Hooks in scope a hook point is one thread-local pointer test, so training and
// decoding compute the same bits with or without this file. Capturing or replacing an
// attention pattern makes that layer also form its (n x m) weights.
//
// Threads: hooks are set per thread (HookScope); the kernels' worker threads never run modules.
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

// What the forward passes in a HookScope do at their hook points.
struct Hooks {
  // Capture: a hook point whose name passes the filter is stored in `cache` under its name, as it
  // flows on (after any replacement). A name passed again (one pass per decoded token) keeps the
  // last. An empty filter captures nothing.
  std::function<bool(std::string_view name)> capture;
  std::map<std::string, Var> cache;
  // Replace: at the hook point of exactly this name, what the function returns flows on.
  std::map<std::string, HookFn> replace;
  // Every hook point passed, in the order first passed.
  std::vector<std::string> passed;

 private:
  friend struct HookAccess;
  std::set<std::string> seen_;
};

// A capture filter from glob patterns ('*' matches any run of characters, e.g. "*.attn.pattern",
// "blocks.2.*"); a name passes when any pattern matches it.
std::function<bool(std::string_view)> names_matching(std::vector<std::string> patterns);
bool glob_match(std::string_view pattern, std::string_view name);

// Installs hooks for the forward passes of this thread until destroyed (the previous ones, if
// any, come back then). The Hooks must outlive the scope.
class HookScope {
 public:
  explicit HookScope(Hooks& hooks);
  ~HookScope();
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;

 private:
  Hooks* previous_;
};

namespace detail {
extern thread_local Hooks* active_hooks;
struct Hooked {
  Var value;
  bool replaced = false;
};
Hooked run_hook(const Var& x, const std::string& prefix, const char* name);
}  // namespace detail

inline bool hooks_active() { return detail::active_hooks != nullptr; }

// The hook point prefix + name on x: x itself when no hooks are in scope.
inline Var hook_point(const Var& x, const std::string& prefix, const char* name) {
  if (!detail::active_hooks) return x;
  return detail::run_hook(x, prefix, name).value;
}
// A model-level hook point ("logits", "encoder.embed"): the name whole.
inline Var hook_point(const Var& x, const char* name) {
  if (!detail::active_hooks) return x;
  static const std::string none;
  return detail::run_hook(x, none, name).value;
}
// For an activation that costs something to form (an attention pattern): true when the hook
// point prefix + name is captured or replaced. Marks it passed. False when no hooks are in scope.
bool hook_wanted(const std::string& prefix, const char* name);

// Every hook point of the model, in the order a forward pass reaches them (one pass over a
// single token in eval mode, without recording; the model's flag is restored).
std::vector<std::string> hook_points(const Model& model);

// Throws qkv::Error naming op when a name (exact, or a glob pattern) matches no hook point of
// the model; the message lists the nearest names.
void check_hook_names(const Model& model, const std::vector<std::string>& names, const char* op);

}  // namespace qkv::nn
