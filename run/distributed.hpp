// The thin MPI layer of data-parallel training (`mpirun -np N qkv train CONFIG`).
//
// Built with QKV_MPI (CMake option, on when MPI is found) these call MPI; built without it, or
// run without a launcher, every process is rank 0 of 1 and the collectives return their input
// unchanged, so `qkv` behaves exactly as a single process. MPI is only initialised when the
// process was started by a launcher (mpirun sets OMPI_COMM_WORLD_SIZE, PMI_SIZE or
// PMIX_RANK): a plain `qkv train` never touches MPI.
//
// Every collective must be called by all ranks in the same order with the same sizes; the
// callers in train.cpp and bench.cpp keep their control flow identical on every rank (the
// decisions that could differ - stop early, interrupted, non-finite loss - are reduced first).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/var.hpp"
#include "train/distributed.hpp"

namespace qkv::run::dist {

// True when this binary was built with MPI support.
bool compiled_with_mpi();

// RAII: initialises MPI when launched by mpirun (else nothing) and finalises it on
// destruction. One per process, in main.
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

int rank();  // 0 without MPI
int size();  // 1 without MPI
inline bool is_root() { return rank() == 0; }

// In-place sums over all ranks. n elements of data, the same n on every rank.
void allreduce_sum(float* data, int64_t n);
void allreduce_sum(double* data, int64_t n);
// In-place maximum over all ranks.
void allreduce_max(double* data, int64_t n);
// Rank 0's value on every rank (a broadcast of one double).
double from_root(double value);
void barrier();
// Stops every rank of the job with this exit code (MPI_Abort); without MPI, std::exit.
[[noreturn]] void abort(int code);

// Gradient averaging for data parallelism: sums every parameter's .grad() over the ranks.
// Gradients are packed into contiguous float32 buckets of at most bucket_bytes each (one
// MPI_Allreduce per bucket, in parameter order), then each parameter's .grad() becomes a view
// of its bucket slice. A parameter with no gradient on this rank (e.g. an empty shard)
// contributes zeros, so every rank ends with the same defined gradients. With one rank:
// nothing happens (and no buckets). Throws qkv::Error when a parameter is not float32.
class GradReducer {
 public:
  explicit GradReducer(std::vector<ag::Var> params, int64_t bucket_bytes = 4 << 20);
  void reduce();
  int64_t buckets() const { return static_cast<int64_t>(buckets_.size()); }
  double seconds() const { return seconds_; }  // total time spent in reduce()

 private:
  struct Bucket {
    size_t first = 0, last = 0;  // parameters [first, last)
    int64_t numel = 0;
  };
  std::vector<ag::Var> params_;
  std::vector<Bucket> buckets_;
  double seconds_ = 0;
};

// Every rank's value of a double (e.g. a parameter checksum) equal? Throws qkv::Error naming
// `what` when the ranks disagree.
void check_same_on_all_ranks(double value, const std::string& what);

// Fault injection for tests and drills, read here only: QKV_FAULT="RANK:STEP" makes rank RANK
// throw qkv::Error("... injected fault ...") when train reaches step STEP. Unset: nothing.
void maybe_inject_fault(int64_t step);

// The Trainer's distributed context under mpirun (train/distributed.hpp): the loss and "stop?"
// in one allreduce, the gradients through a GradReducer over params, QKV_FAULT at each step.
// Run without a launcher it is rank 0 of 1 and behaves as train::SingleProcess (no MPI call).
class Context final : public train::Distributed {
 public:
  explicit Context(std::vector<ag::Var> params, int64_t bucket_bytes = 4 << 20)
      : reducer_(std::move(params), bucket_bytes) {}
  int rank() const override { return dist::rank(); }
  int size() const override { return dist::size(); }
  void begin_step(int64_t step) override { maybe_inject_fault(step); }
  void agree(double& loss, bool& stop) override;
  bool decides_alone() const override { return dist::size() == 1; }
  void reduce_gradients() override { reducer_.reduce(); }
  void allreduce_sum(double* data, int64_t n) override { dist::allreduce_sum(data, n); }
  double from_root(double value) override { return dist::from_root(value); }
  void barrier() override { dist::barrier(); }
  void check_same(double value, const std::string& what) override {
    check_same_on_all_ranks(value, what);
  }
  GradReducer& reducer() { return reducer_; }

 private:
  GradReducer reducer_;
};

}  // namespace qkv::run::dist
