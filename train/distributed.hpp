// The distributed context a Trainer is given: how this process agrees with the others on a
// step's loss, on stopping and on the gradients. SingleProcess is the no-op of one process;
// data-parallel training over MPI implements the same interface (run/distributed.hpp,
// dist::Context), so the training loop itself has no rank branches.
//
// Every method that communicates must be called by all processes in the same order; the
// Trainer keeps its control flow identical on every process by deciding only on agreed values.
#pragma once
#include <cstdint>
#include <string>

namespace qkv::train {

class Distributed {
 public:
  virtual ~Distributed() = default;
  virtual int rank() const = 0;  // 0 .. size() - 1
  virtual int size() const = 0;
  bool is_root() const { return rank() == 0; }

  // At the start of step `step` (1-based), before its forward: e.g. fault injection in drills.
  virtual void begin_step(int64_t step) = 0;
  // The step's loss: in, this process's share; out, the sum over processes (the global loss).
  // stop: in, whether this process wants to stop; out, whether any process does. One
  // collective for both.
  virtual void agree(double& loss, bool& stop) = 0;
  // True when this process decides alone (one process): the Trainer then asks its hooks again
  // at the end of a step for the latest news; with several processes every decision is the one
  // agreed in agree(), so that all take the same branch.
  virtual bool decides_alone() const = 0;
  // Sums every parameter's gradient over the processes (after backward, before clipping).
  virtual void reduce_gradients() = 0;
  // Helpers for hooks: in-place sum, rank 0's value, a barrier, and a check that every
  // process holds the same value (throws qkv::Error naming `what` when not).
  virtual void allreduce_sum(double* data, int64_t n) = 0;
  virtual double from_root(double value) = 0;
  virtual void barrier() = 0;
  virtual void check_same(double value, const std::string& what) = 0;
};

// One process: every collective returns its input.
class SingleProcess final : public Distributed {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void begin_step(int64_t) override {}
  void agree(double&, bool&) override {}
  bool decides_alone() const override { return true; }
  void reduce_gradients() override {}
  void allreduce_sum(double*, int64_t) override {}
  double from_root(double value) override { return value; }
  void barrier() override {}
  void check_same(double, const std::string&) override {}
};

}  // namespace qkv::train
