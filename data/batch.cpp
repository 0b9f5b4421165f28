#include "data/batch.hpp"

#include <algorithm>
#include <numeric>

namespace qkv::data {

namespace {
const Example& example_at(const Dataset& ds, int64_t i, const char* op) {
  QKV_CHECK(i >= 0 && i < ds.size(), op, "index ", i, " out of range for dataset '", ds.name,
            "' of ", ds.size(), " examples");
  return ds.examples[static_cast<size_t>(i)];
}

int64_t len(const Ids& v) { return static_cast<int64_t>(v.size()); }
}  // namespace

Batch make_batch(const Dataset& ds, const std::vector<int64_t>& indices, const Framing& f) {
  QKV_CHECK(!indices.empty(), "make_batch", "no examples for a batch of '", ds.name, "'");
  QKV_CHECK(f.bos >= 0, "make_batch", "framing needs a <bos> id, got ", f.bos);
  int64_t S = 0, T = 0;
  for (int64_t i : indices) {
    const Example& e = example_at(ds, i, "make_batch");
    QKV_CHECK(!e.src.empty(), "make_batch", "example ", i, " of '", ds.name,
              "' has an empty source");
    QKV_CHECK(f.target_len(len(e.tgt)) > 0, "make_batch", "example ", i, " of '", ds.name,
              "' has an empty target and the framing adds no <eos>");
    S = std::max(S, len(e.src));
    T = std::max(T, f.target_len(len(e.tgt)));
  }
  const int64_t B = static_cast<int64_t>(indices.size());
  Batch b;
  b.src = zeros({B, S}, DType::i64);
  b.src_mask = zeros({B, S}, DType::b8);
  b.tgt_in = zeros({B, T}, DType::i64);
  b.tgt_out = zeros({B, T}, DType::i64);
  b.tgt_mask = zeros({B, T}, DType::b8);
  b.indices = indices;
  int64_t* src = b.src.data<int64_t>();
  uint8_t* src_mask = b.src_mask.data<uint8_t>();
  int64_t* tin = b.tgt_in.data<int64_t>();
  int64_t* tout = b.tgt_out.data<int64_t>();
  uint8_t* tmask = b.tgt_mask.data<uint8_t>();
  for (int64_t r = 0; r < B; ++r) {
    const Example& e = ds.examples[static_cast<size_t>(indices[static_cast<size_t>(r)])];
    for (int64_t j = 0; j < len(e.src); ++j) {
      const int64_t id = e.src[static_cast<size_t>(j)];
      QKV_CHECK(id >= 0, "make_batch", "example ", indices[static_cast<size_t>(r)], " of '",
                ds.name, "' has a negative source id ", id);
      src[r * S + j] = id;
      src_mask[r * S + j] = 1;
    }
    // full = bos y [eos]; in = full[:-1], out = full[1:]
    const int64_t n = f.target_len(len(e.tgt));
    for (int64_t j = 0; j < n; ++j) {
      const int64_t in = j == 0 ? f.bos : e.tgt[static_cast<size_t>(j - 1)];
      const int64_t out = j < len(e.tgt) ? e.tgt[static_cast<size_t>(j)] : f.eos;
      QKV_CHECK(in >= 0 && out >= 0, "make_batch", "example ", indices[static_cast<size_t>(r)],
                " of '", ds.name, "' has a negative target id");
      tin[r * T + j] = in;
      tout[r * T + j] = out;
      tmask[r * T + j] = 1;
    }
    b.src_tokens += len(e.src);
    b.tgt_tokens += n;
  }
  b.global_size = B;
  b.global_src_tokens = b.src_tokens;
  b.global_tgt_tokens = b.tgt_tokens;
  return b;
}

Plan plan_batches(const Dataset& ds, const Framing& f, const BatchOptions& o, Generator& g) {
  QKV_CHECK(o.batch_size >= 1, "plan_batches", "batch_size must be >= 1, got ", o.batch_size);
  QKV_CHECK(o.max_tokens >= 0, "plan_batches", "max_tokens must be >= 0, got ", o.max_tokens);
  QKV_CHECK(o.bucket_pool >= 1, "plan_batches", "bucket_pool must be >= 1, got ", o.bucket_pool);
  const int64_t n = ds.size();
  std::vector<int64_t> order;
  if (o.shuffle) {
    order = randperm(n, g);
  } else {
    order.resize(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  auto src_len = [&](int64_t i) { return len(ds.examples[static_cast<size_t>(i)].src); };
  auto tgt_len = [&](int64_t i) {
    return f.target_len(len(ds.examples[static_cast<size_t>(i)].tgt));
  };
  if (o.bucket) {
    const int64_t pool = o.bucket_pool * o.batch_size;
    for (int64_t lo = 0; lo < n; lo += pool) {
      // stable: equal lengths keep their shuffled order, so ties do not undo the shuffle
      std::stable_sort(
          order.begin() + lo, order.begin() + std::min(n, lo + pool), [&](int64_t a, int64_t b) {
            return std::pair(src_len(a), tgt_len(a)) < std::pair(src_len(b), tgt_len(b));
          });
    }
  }
  Plan plan;
  std::vector<int64_t> cur;
  int64_t width = 0;  // max(S, T) of cur
  for (int64_t i : order) {
    const int64_t w = std::max({width, src_len(i), tgt_len(i)});
    const int64_t rows = static_cast<int64_t>(cur.size()) + 1;
    const bool full = rows > o.batch_size || (o.max_tokens > 0 && rows * w > o.max_tokens);
    if (full && !cur.empty()) {
      plan.push_back(std::move(cur));
      cur.clear();
      width = 0;
    }
    cur.push_back(i);
    width = std::max({width, src_len(i), tgt_len(i)});
  }
  if (!cur.empty()) plan.push_back(std::move(cur));
  if (o.bucket && o.shuffle) {
    const std::vector<int64_t> perm = randperm(static_cast<int64_t>(plan.size()), g);
    Plan shuffled;
    shuffled.reserve(plan.size());
    for (int64_t p : perm) shuffled.push_back(std::move(plan[static_cast<size_t>(p)]));
    plan = std::move(shuffled);
  }
  return plan;
}

PaddingStats padding_stats(const Dataset& ds, const Plan& plan, const Framing& f) {
  PaddingStats st;
  for (const auto& batch : plan) {
    int64_t S = 0, T = 0;
    for (int64_t i : batch) {
      const Example& e = example_at(ds, i, "padding_stats");
      S = std::max(S, len(e.src));
      T = std::max(T, f.target_len(len(e.tgt)));
      st.real += len(e.src) + f.target_len(len(e.tgt));
    }
    st.slots += static_cast<int64_t>(batch.size()) * (S + T);
  }
  return st;
}

}  // namespace qkv::data
