#include "run/distributed.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <string>

#include "core/error.hpp"

#ifdef QKV_HAVE_MPI
// The C API only: the deprecated C++ bindings would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace qkv::run::dist {

namespace {
int g_rank = 0;
int g_size = 1;

#ifdef QKV_HAVE_MPI
bool g_active = false;  // MPI_Init was called by this process

// Launched by mpirun (Open MPI, or any PMI/PMIx launcher)? Singleton MPI_Init in Open MPI
// starts a helper daemon, so a plain `qkv train` should not initialise MPI at all.
bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

// MPI counts are int: large buffers go in chunks.
template <class T>
void allreduce_chunks(T* data, int64_t n, MPI_Datatype type, MPI_Op op) {
  constexpr int64_t kChunk = INT_MAX / 2;
  for (int64_t off = 0; off < n; off += kChunk) {
    const int count = static_cast<int>(std::min(kChunk, n - off));
    const int rc = MPI_Allreduce(MPI_IN_PLACE, data + off, count, type, op, MPI_COMM_WORLD);
    QKV_CHECK(rc == MPI_SUCCESS, "MPI_Allreduce", "failed with code ", rc, " on ", count,
              " elements");
  }
}
#endif
}  // namespace

bool compiled_with_mpi() {
#ifdef QKV_HAVE_MPI
  return true;
#else
  return false;
#endif
}

Session::Session() {
#ifdef QKV_HAVE_MPI
  if (!launched_by_mpirun()) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  // Only the main thread calls MPI (OpenMP workers and the loader's prefetch thread never do).
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  g_active = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
#endif
}

Session::~Session() {
#ifdef QKV_HAVE_MPI
  if (g_active) MPI_Finalize();
  g_active = false;
#endif
}

int rank() { return g_rank; }
int size() { return g_size; }

void allreduce_sum(float* data, int64_t n) {
#ifdef QKV_HAVE_MPI
  if (g_size > 1) allreduce_chunks(data, n, MPI_FLOAT, MPI_SUM);
#else
  (void)data, (void)n;
#endif
}

void allreduce_sum(double* data, int64_t n) {
#ifdef QKV_HAVE_MPI
  if (g_size > 1) allreduce_chunks(data, n, MPI_DOUBLE, MPI_SUM);
#else
  (void)data, (void)n;
#endif
}

void allreduce_max(double* data, int64_t n) {
#ifdef QKV_HAVE_MPI
  if (g_size > 1) allreduce_chunks(data, n, MPI_DOUBLE, MPI_MAX);
#else
  (void)data, (void)n;
#endif
}

double from_root(double value) {
  double v = g_rank == 0 ? value : 0.0;  // x + 0 + ... + 0 is exactly x
  allreduce_sum(&v, 1);
  return v;
}

void barrier() {
#ifdef QKV_HAVE_MPI
  if (g_size > 1) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

void abort(int code) {
#ifdef QKV_HAVE_MPI
  if (g_active) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  std::exit(code);
}

GradReducer::GradReducer(std::vector<ag::Var> params, int64_t bucket_bytes)
    : params_(std::move(params)) {
  if (size() == 1) return;  // one process: nothing to reduce, nothing to check
  QKV_CHECK(bucket_bytes >= 4, "GradReducer", "bucket size must be >= 4 bytes, got ", bucket_bytes);
  const int64_t cap = bucket_bytes / 4;
  Bucket b;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].data();
    QKV_CHECK(p.dtype() == DType::f32, "GradReducer", "parameter ", i, " of shape ", p.shape(),
              " is ", dtype_name(p.dtype()), "; gradients are reduced as float32");
    // A parameter larger than a bucket gets a bucket of its own.
    if (b.numel > 0 && b.numel + p.numel() > cap) {
      buckets_.push_back(b);
      b = Bucket{i, i, 0};
    }
    b.last = i + 1;
    b.numel += p.numel();
  }
  if (b.numel > 0) buckets_.push_back(b);
}

void GradReducer::reduce() {
  if (size() == 1) return;
  const auto t0 = std::chrono::steady_clock::now();
  for (const Bucket& b : buckets_) {
    Tensor flat = empty({b.numel});
    std::vector<Tensor> slices;
    int64_t off = 0;
    for (size_t i = b.first; i < b.last; ++i) {
      const Tensor& p = params_[i].data();
      Tensor s = flat.narrow(0, off, p.numel()).view(p.shape());
      const Tensor& g = params_[i].grad();
      if (g.defined())
        s.copy_(g);
      else
        s.zero_();
      slices.push_back(s);
      off += p.numel();
    }
    allreduce_sum(flat.data<float>(), b.numel);
    // Views of the bucket, one region each: in-place clipping of one never touches another.
    for (size_t i = b.first; i < b.last; ++i) params_[i].grad() = slices[i - b.first];
  }
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void check_same_on_all_ranks(double value, const std::string& what) {
  if (size() == 1) return;
  double v[2] = {value, -value};
  allreduce_max(v, 2);
  QKV_CHECK(v[0] == -v[1], "data-parallel", what, " differs between ranks (from ", -v[1], " to ",
            v[0], "): the replicas diverged");
}

void maybe_inject_fault(int64_t step) {
  static const char* spec = std::getenv("QKV_FAULT");
  if (spec == nullptr || *spec == '\0') return;
  const std::string s(spec);
  const size_t colon = s.find(':');
  long long r = -1, at = -1;
  try {
    size_t used = 0;
    if (colon != std::string::npos) {
      r = std::stoll(s.substr(0, colon), &used);
      if (used != colon) r = -1;
      at = std::stoll(s.substr(colon + 1), &used);
      if (used != s.size() - colon - 1) at = -1;
    }
  } catch (const std::exception&) {
    r = at = -1;
  }
  QKV_CHECK(r >= 0 && at >= 1, "QKV_FAULT", "expected RANK:STEP (e.g. 1:5), got '", s, "'");
  if (r == rank() && at == step)
    throw Error(
        cat("train: rank ", rank(), ": injected fault at step ", step, " (QKV_FAULT=", s, ")"));
}

void Context::agree(double& loss, bool& stop) {
  if (dist::size() == 1) return;
  double r[2] = {loss, stop ? 1.0 : 0.0};
  dist::allreduce_sum(r, 2);
  loss = r[0];
  stop = r[1] > 0;
}

}  // namespace qkv::run::dist
