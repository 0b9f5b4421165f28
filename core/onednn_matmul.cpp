// One-thread oneDNN bf16 matmuls, planned once per shape and cached per thread
// (core/onednn_matmul.hpp).
#include "onednn_matmul.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <vector>

#include "error.hpp"
#include "kernel_util.hpp"
#include "onednn_engine.hpp"

namespace qkv::kernel {
namespace {

using Dims = dnnl::memory::dims;
using DT = dnnl::memory::data_type;

dnnl::memory::desc operand_desc(int64_t rows, int64_t cols, const Bf16Operand& o) {
  return dnnl::memory::desc(Dims{rows, cols}, DT::bf16, o.trans ? Dims{1, o.ld} : Dims{o.ld, 1});
}

// (n, m, k, lda, ta, ldb, tb, ldc, accumulate)
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, int64_t, bool, int64_t, bool>;

// A primitive with its memory objects (pointed at the operands per call), arguments and
// scratchpad, made once.
dnnl::matmul::primitive_desc plan(int64_t n, int64_t m, int64_t k, const Bf16Operand& a,
                                  const Bf16Operand& b, int64_t ldc, bool accumulate) {
  const dnnl::memory::desc c_md(Dims{n, m}, DT::f32, Dims{ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  try {
    const dnnl::matmul::desc d(operand_desc(n, k, a), operand_desc(k, m, b), c_md);
    return dnnl::matmul::primitive_desc(d, attr, onednn_engine());
  } catch (const dnnl::error& e) {
    throw Error("oneDNN bf16 matmul " + std::to_string(n) + " x " + std::to_string(m) + ", k " +
                std::to_string(k) + ": no kernel here (" + e.what() + ")");
  }
}

// This thread's plans, the least recently used dropped past kMaxBf16Plans: sequences of many
// lengths would otherwise keep a plan for every tail block they ever had.
struct Plans {
  struct Entry {
    std::unique_ptr<MatmulProduct> product;
    uint64_t used = 0;
  };
  std::map<Key, Entry> by_key;
  uint64_t clock = 0;

  MatmulProduct& get(const Key& key, const auto& make) {
    auto it = by_key.find(key);
    if (it == by_key.end()) {
      if (by_key.size() >= kMaxBf16Plans) drop_least_recent();
      it = by_key.emplace(key, Entry{make(), 0}).first;
    }
    it->second.used = ++clock;
    return *it->second.product;
  }

  void drop_least_recent() {
    auto oldest = std::min_element(by_key.begin(), by_key.end(), [](const auto& x, const auto& y) {
      return x.second.used < y.second.used;
    });
    by_key.erase(oldest);
  }
};

thread_local Plans plans;

}  // namespace

void matmul_bf16_one_thread(int64_t n, int64_t m, int64_t k, Bf16Operand a, Bf16Operand b, float* c,
                            int64_t ldc, bool accumulate) {
  const OmpOneThread one;  // planned and run for one thread: its bits do not depend on the pool
  MatmulProduct& p = plans.get(Key{n, m, k, a.ld, a.trans, b.ld, b.trans, ldc, accumulate}, [&] {
    return MatmulProduct::make(plan(n, m, k, a, b, ldc, accumulate), false);
  });
  p.src.set_data_handle(const_cast<bf16_t*>(a.p));
  p.wei.set_data_handle(const_cast<bf16_t*>(b.p));
  p.dst.set_data_handle(c);
  p.run();
}

size_t matmul_bf16_plans_on_this_thread() { return plans.by_key.size(); }

std::string matmul_bf16_kernel_name(int64_t n, int64_t m, int64_t k) {
  try {
    const OmpOneThread one;
    return plan(n, m, k, {nullptr, k}, {nullptr, m}, m, false).impl_info_str();
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace qkv::kernel
