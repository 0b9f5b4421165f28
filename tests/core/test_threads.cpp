// Threading: results do not depend on the thread count (reductions always, products under
// ThreadInvariantProducts), and BLAS never adds threads of its own (the OpenMP build of
// OpenBLAS runs single-threaded inside a parallel region).
#include <cblas.h>
#include <omp.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <string>

#include "core/fused.hpp"
#include "core/parallel.hpp"
#include "core/precision.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

// The "Threads:" line of /proc/self/status: every thread of this process, OpenMP or not.
int process_threads() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

// Every op whose result must not depend on the thread count, on inputs > 1e6 elements.
std::vector<Tensor> reductions(const Tensor& x) {
  const Tensor xt = x.t();  // lanes along the strided dim
  return {sum(x),
          mean(x),
          max(x),
          min(x),
          var(x),
          sum(x, {0}),
          sum(x, {1}),
          mean(xt, {0}, true),
          var(x, {0}),
          var(xt, {1}),
          max(x, {1}),
          argmax(x, 0),
          argmax(xt, 1),
          argmax(x.flatten(), 0),
          sum(x.view({64, 16, 1000}), {0, 2}),
          sum(x.flatten().slice(0, 0, x.numel(), 3)),  // one long strided lane
          softmax(x, 0),
          log_softmax(x, 1),
          sum_to(x, {1, 1000})};
}

}  // namespace

TEST_CASE("reductions are bitwise identical with 1 and 2 threads on > 1e6 elements") {
  ThreadGuard guard;
  Generator g(31337);
  const Tensor x32 = randn({1024, 1000}, g, DType::f32);  // 1.02e6 elements
  const Tensor x64 = randn({1024, 1000}, g, DType::f64);
  REQUIRE(x32.numel() > 1000000);
  for (const Tensor& x : {x32, x64}) {
    set_num_threads(1);
    const std::vector<Tensor> one = reductions(x);
    set_num_threads(2);
    REQUIRE(get_num_threads() == 2);
    const std::vector<Tensor> two = reductions(x);
    for (size_t i = 0; i < one.size(); ++i) {
      INFO(dtype_name(x.dtype()) << " result " << i);
      CHECK(same_bits(one[i], two[i]));
    }
  }
}

TEST_CASE("set_num_threads sets OpenMP and OpenBLAS, and OpenBLAS is the OpenMP build") {
  ThreadGuard guard;
  // 2 = OpenMP (0 = sequential, 1 = pthreads): the build that shares qkv's thread pool.
  CHECK(openblas_get_parallel() == 2);
  for (int n : {1, 2, 3}) {
    set_num_threads(n);
    CHECK(get_num_threads() == n);
    CHECK(omp_get_max_threads() == n);
    CHECK(openblas_get_num_threads() == n);
  }
  CHECK_FALSE(in_parallel_region());
  int inside = 0;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    inside = in_parallel_region() ? 1 : 0;
  }
  CHECK(inside == 1);
}

TEST_CASE("matmul inside an OpenMP parallel region starts no threads of its own") {
  ThreadGuard guard;
  const int pool = 2;
  set_num_threads(pool);
  // Warm up: the pool exists, OpenBLAS is initialised (a pthreads build would have started
  // its own workers by now; the OpenMP build starts none).
  Generator g(5);
  const Tensor a = randn({256, 256}, g), b = randn({256, 256}, g);
  const Tensor want = matmul(a, b);  // outside a region: BLAS uses the pool
  const int before = process_threads();
  REQUIRE(before >= 1);
  CHECK(before <= pool);

  std::atomic<int> peak{0};
  std::atomic<int> regions{0};
  std::vector<Tensor> got(2 * pool);
#pragma omp parallel num_threads(pool)
  {
    regions = omp_get_num_threads();
    // Each thread runs whole GEMMs (each large enough that BLAS would parallelise it if it
    // could) and samples the process thread count while the others are mid-GEMM.
#pragma omp for schedule(static)
    for (int i = 0; i < 2 * pool; ++i) {
      got[i] = matmul(i % 2 ? a.t() : a, b);
      int now = process_threads();
      int p = peak.load();
      while (now > p && !peak.compare_exchange_weak(p, now)) {
      }
    }
    const int now = process_threads();
    int p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
  }
  CHECK(regions == pool);
  INFO("threads before " << before << ", peak inside " << peak.load() << ", pool " << pool);
  CHECK(peak.load() >= 1);
  CHECK(peak.load() <= pool);
  CHECK(process_threads() <= pool);
  // and the products are right
  CHECK(max_abs_diff(got[0], want) < 1e-3);
  CHECK(max_abs_diff(got[2], want) < 1e-3);
  CHECK(max_abs_diff(got[1], matmul(a.t(), b)) < 1e-3);
  // a batched matmul of small matrices runs its GEMMs in the pool, also with no extra threads
  const Tensor qa = randn({16, 32, 32}, g), qb = randn({16, 32, 32}, g);
  const Tensor batched = matmul(qa, qb);
  CHECK(process_threads() <= pool);
  CHECK(max_abs_diff(batched.select(0, 7), matmul(qa.select(0, 7), qb.select(0, 7))) < 1e-4);
}

TEST_CASE("matmul results do not depend on whether it runs inside a parallel region") {
  ThreadGuard guard;
  set_num_threads(2);
  Generator g(6);
  const Tensor a = randn({3, 40, 50}, g, DType::f64), b = randn({50, 30}, g, DType::f64);
  const Tensor outside = matmul(a, b);
  Tensor inside;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    inside = matmul(a, b);
  }
  CHECK(max_abs_diff(inside, outside) < 1e-12);
}

TEST_CASE("parallel region timers: off by default, on they count regions and each thread's work") {
  set_num_threads(2);
  std::atomic<int64_t> seen{0};
  auto region = [&] {
    parallel_for(1 << 20, 1, [&](int64_t lo, int64_t hi) {
      volatile double s = 0;
      for (int64_t i = lo; i < hi; ++i) s = s + double(i);
      seen += hi - lo;
    });
  };
  region();
  CHECK(parallel_stats().regions == 0);
  parallel_stats_enable(true);
  region();
  region();
  parallel_for(10, 1, [](int64_t, int64_t) {});  // below the grain: no region, not counted
  const ParallelStats s = parallel_stats();
  parallel_stats_enable(false);
  set_num_threads(0);
  CHECK(seen == 3 << 20);
  CHECK(s.regions == 2);
  CHECK(s.seconds > 0);
  for (double busy : s.busy_seconds) {
    CHECK(busy > 0);
    CHECK(busy <= s.seconds);
  }
  region();
  CHECK(parallel_stats().regions == 0);  // enable(false) cleared them, and nothing is recorded
}

namespace {

// Products of every band layout: one call (small), row bands, column bands (wider than tall),
// transposed operands, a batch of matrices (whole matrices per thread or banded), a bias.
std::vector<Tensor> products(Generator& g) {
  const Tensor a = randn({641, 256}, g), b = randn({256, 512}, g), wide = randn({256, 6000}, g);
  const Tensor batch = randn({3, 100, 96}, g), w = randn({300, 256}, g), bias = randn({300}, g);
  return {matmul(a.narrow(0, 0, 3), b),  // below the banding threshold
          matmul(a, b),
          matmul(a.narrow(0, 0, 40), wide),
          matmul(a.t().narrow(1, 0, 250).t(), b.t().contiguous().t()),
          matmul(batch, b.narrow(0, 0, 96)),
          linear_forward(a, w, bias)};
}

// Runs make() inside a ThreadInvariantProducts scope at 1, 2 and 3 threads: the same bits each
// time.
template <class F>
void check_same_bits_at_1_2_3_threads(F&& make) {
  ThreadGuard guard;
  const ThreadInvariantProducts invariant;
  std::vector<std::vector<Tensor>> runs;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    runs.push_back(make());
  }
  for (size_t t = 1; t < runs.size(); ++t)
    for (size_t i = 0; i < runs[0].size(); ++i) {
      INFO("threads " << t + 1 << ", product " << i);
      CHECK(same_bits(runs[0][i], runs[t][i]));
    }
}

}  // namespace

TEST_CASE("thread-invariant products give the same bits at 1, 2 and 3 threads") {
  check_same_bits_at_1_2_3_threads([] {
    Generator g(8);
    return products(g);
  });
}

TEST_CASE("a thread-invariant product is its bands fixed by the shape, each one BLAS call") {
  ThreadGuard guard;
  set_num_threads(2);
  Generator g(9);
  const Tensor a = randn({641, 256}, g), b = randn({256, 512}, g);
  Tensor got;
  {
    const ThreadInvariantProducts invariant;
    got = matmul(a, b);
  }
  // 641 rows in bands of 96 (641 / 8 rounded up to a multiple of 16): 7 calls, the last 65 rows.
  set_num_threads(1);  // one thread outside the scope: each band is one plain GEMM call
  for (int64_t lo = 0; lo < 641; lo += 96) {
    const int64_t rows = std::min<int64_t>(96, 641 - lo);
    INFO("band at row " << lo);
    CHECK(same_bits(got.narrow(0, lo, rows), matmul(a.narrow(0, lo, rows), b)));
  }
}

TEST_CASE("thread-invariant bf16 products give the same bits at 1, 2 and 3 threads") {
  SKIP_WITHOUT_BF16();
  check_same_bits_at_1_2_3_threads([] {
    const PrecisionScope bf16(Precision::bf16);
    Generator g(10);
    const Tensor x = randn({641, 256}, g), w = randn({300, 256}, g), bias = randn({300}, g);
    const Tensor gy = randn({641, 300}, g), wide = randn({6000, 256}, g);
    return std::vector<Tensor>{linear_forward(x, w, bias),
                               linear_forward(x.narrow(0, 0, 40), wide, Tensor()),
                               linear_input_grad(gy, w), linear_weight_grad(gy, x),
                               linear_forward(x.narrow(0, 0, 5), w, bias)};
  });
}
