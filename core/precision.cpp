#include "precision.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "attention_backend.hpp"
#include "bf16_cache.hpp"
#include "error.hpp"
#include "onednn.hpp"
#include "storage.hpp"

namespace qkv {
namespace {

struct WeightCopy {
  std::vector<bf16_t> bits;
  uint64_t generation = 0;  // the outermost scope that converted it
  Tensor keep;              // holds the storage (so its address is not reused) while in a scope
};

using WeightKey = std::tuple<const void*, int64_t, int64_t, int64_t, int64_t>;

// An activation's copy: valid while its storage is at `version`, within one scope. It lives
// as long as its storage: once the tensor is freed (an output gradient after its two
// products), the buffer goes back to the caching allocator (core/storage.hpp), which hands it
// to the next copy of its size class: a steady step neither zeroes a copy's buffer nor takes
// fresh pages from the system for it (a std::vector did both, 4% of Multi30k's bf16 step).
struct ActivationCopy {
  std::unique_ptr<Storage> buffer;  // at least `count` bf16 values
  size_t count = 0;
  uint64_t version = 0;
  std::weak_ptr<Storage> storage;
  bf16_t* bits() const { return static_cast<bf16_t*>(buffer->data()); }
};

// (storage id, first element, rows, cols, ld): ids are never reused, so a freed tensor's
// storage handed to a new tensor cannot match an old copy.
using ActivationKey = std::tuple<uint64_t, const void*, int64_t, int64_t, int64_t>;

// Bytes of activation copies one scope keeps before it rounds into scratch instead: a step
// needs a fraction of this; a command's scope around all its decoding would grow without it.
constexpr size_t kActivationCacheBytes = size_t(512) << 20;

// One per thread: the precision in force, the scope depth and the weight copies.
struct PrecisionState {
  Precision precision = Precision::fp32;
  int depth = 0;
  uint64_t generation = 0;
  std::map<WeightKey, WeightCopy> weights;
  std::map<ActivationKey, ActivationCopy> activations;  // this scope's
  size_t activation_bytes = 0;
  uint64_t roundings = 0;
  std::vector<bf16_t> scratch[2];
};

// The copies whose storage has been freed: their buffers go back to the allocator.
void drop_dead_copies(PrecisionState& s) {
  for (auto it = s.activations.begin(); it != s.activations.end();) {
    if (!it->second.storage.expired()) {
      ++it;
      continue;
    }
    s.activation_bytes -= it->second.count * sizeof(bf16_t);
    it = s.activations.erase(it);
  }
}

// Every activation copy is stale once a scope begins or ends.
void drop_activation_copies(PrecisionState& s) {
  s.activations.clear();
  s.activation_bytes = 0;
}

PrecisionState& state() {
  thread_local PrecisionState s;
  return s;
}

const float* first_element(const detail::StoredMatrix& m) { return m.t.data<float>(); }

}  // namespace

const char* precision_name(Precision p) {
  return name_of(p).data();  // the table's names are string literals, NUL-terminated
}

Precision parse_precision(const std::string& name, const std::string& key) {
  return parse_name<Precision>(name, key);
}

std::string bf16_unsupported_reason() {
#if defined(__x86_64__)
  if (!cpu_has_avx512_bf16())
    return "this CPU lacks AVX512_BF16 (the bf16 dot-product instructions, vdpbf16ps)";
  if (!onednn_isa_has_bf16())
    return "oneDNN is capped at " + onednn_isa() +
           " (ONEDNN_MAX_CPU_ISA), below avx512_core_bf16, the ISA with AVX512_BF16";
  return "";
#else
  // "This CPU lacks AVX512_BF16" would read as a missing feature of, say, an arm64 CPU, whose
  // own bf16 instructions qkv has no kernels for: name the build instead.
  return "qkv's bf16 kernels are x86-64's (AVX512_BF16), and this build is not for x86-64";
#endif
}

Precision resolve_precision(Precision p, const std::string& what) {
  if (p == Precision::fp32) return p;
  const std::string why = bf16_unsupported_reason();
  if (p == Precision::auto_ && !why.empty()) return Precision::fp32;
  if (!why.empty()) throw Error(what + ": bf16 cannot run here: " + why + "; use fp32 or auto");
  (void)attention_backend();  // a bad QKV_ATTENTION_BACKEND is an error before any work
  return Precision::bf16;
}

Precision current_precision() { return state().precision; }

void bf16_gemm_this_thread(bool ta, bool tb, int64_t n, int64_t m, int64_t k, const bf16_t* a,
                           int64_t lda, const bf16_t* b, int64_t ldb, float* c, int64_t ldc) {
  kernel::gemm_bf16_this_thread(ta, tb, n, m, k, a, lda, b, ldb, c, ldc, nullptr);
}

PrecisionScope::PrecisionScope(Precision p) {
  QKV_CHECK(p != Precision::auto_, "PrecisionScope", "resolve \"auto\" first (resolve_precision)");
  if (p == Precision::bf16) resolve_precision(p);
  PrecisionState& s = state();
  saved_ = s.precision;
  s.precision = p;
  ++s.depth;
  ++s.generation;  // copies made before this scope are not reused inside it
  drop_activation_copies(s);
}

PrecisionScope::~PrecisionScope() {
  PrecisionState& s = state();
  s.precision = saved_;
  --s.depth;
  // The weights may change now (the optimizer's update follows a step's scope): every copy is
  // stale. Copies the ending scope did not use are dropped; the others keep their buffers for
  // the next conversion of the same matrix, but not their tensors. A scope that used no copy
  // (the trainer's around an optimizer step) drops none: the next step's forward converts into
  // the buffers it had, instead of allocating them again.
  const bool used_any = std::any_of(s.weights.begin(), s.weights.end(), [&](const auto& kv) {
    return kv.second.generation == s.generation;
  });
  for (auto it = s.weights.begin(); it != s.weights.end();) {
    if (used_any && it->second.generation != s.generation) {
      it = s.weights.erase(it);
    } else {
      it->second.keep = Tensor();
      ++it;
    }
  }
  ++s.generation;
  drop_activation_copies(s);
}

namespace detail {

const bf16_t* bf16_weight(const StoredMatrix& w) {
  PrecisionState& s = state();
  if (s.depth == 0) return bf16_activation(w, 1);  // no scope: nothing may be reused
  const WeightKey key{first_element(w), w.rows, w.cols, w.ld, w.t.storage()->nbytes()};
  WeightCopy& c = s.weights[key];
  if (c.generation != s.generation) {
    c.bits.resize(static_cast<size_t>(w.rows * w.cols));
    to_bf16_rows(first_element(w), w.rows, w.cols, w.ld, c.bits.data());
    c.generation = s.generation;
    c.keep = w.t;
  }
  return c.bits.data();
}

namespace {

const bf16_t* round_into_scratch(PrecisionState& s, const StoredMatrix& x, int slot) {
  std::vector<bf16_t>& buf = s.scratch[slot];
  if (buf.size() < static_cast<size_t>(x.rows * x.cols)) buf.resize(x.rows * x.cols);
  to_bf16_rows(first_element(x), x.rows, x.cols, x.ld, buf.data());
  ++s.roundings;
  return buf.data();
}

// x's entry in the activation cache, made if there is room; nullptr where no copy is kept.
// The entry's version is not set.
ActivationCopy* activation_entry(PrecisionState& s, const StoredMatrix& x) {
  const size_t n = static_cast<size_t>(x.rows * x.cols);
  const Storage& st = *x.t.storage();
  const ActivationKey key{st.id(), first_element(x), x.rows, x.cols, x.ld};
  auto it = s.activations.find(key);
  if (it == s.activations.end()) drop_dead_copies(s);  // room for the new one
  const bool keep =
      s.depth > 0 && (it != s.activations.end() ||
                      s.activation_bytes + n * sizeof(bf16_t) <= kActivationCacheBytes);
  if (!keep) return nullptr;
  if (it == s.activations.end()) {  // a new copy (an in-place write reuses the old buffer)
    it = s.activations.emplace(key, ActivationCopy{}).first;
    it->second.storage = x.t.storage();
    it->second.buffer = std::make_unique<Storage>(std::max<size_t>(n, 1) * sizeof(bf16_t));
    it->second.count = n;
    s.activation_bytes += n * sizeof(bf16_t);
  }
  return &it->second;
}

}  // namespace

const bf16_t* bf16_activation(const StoredMatrix& x, int slot) {
  PrecisionState& s = state();
  const Storage& st = *x.t.storage();
  const ActivationKey key{st.id(), first_element(x), x.rows, x.cols, x.ld};
  auto it = s.activations.find(key);
  if (it != s.activations.end() && it->second.version == st.version()) return it->second.bits();
  ActivationCopy* c = activation_entry(s, x);
  if (!c) return round_into_scratch(s, x, slot);
  to_bf16_rows(first_element(x), x.rows, x.cols, x.ld, c->bits());
  c->version = st.version();
  ++s.roundings;
  return c->bits();
}

bf16_t* bf16_activation_slot(const StoredMatrix& x) {
  ActivationCopy* c = activation_entry(state(), x);
  if (!c) return nullptr;
  c->version = x.t.storage()->version();
  return c->bits();
}

uint64_t bf16_activation_roundings() { return state().roundings; }

}  // namespace detail
}  // namespace qkv
