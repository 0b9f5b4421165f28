// How OpenMP's idle threads wait between parallel regions: spin or sleep, chosen once when a
// qkv program starts.
//
// libgomp's default spins an idle thread for a few milliseconds before it sleeps. On idle cores
// that is the fastest choice (a sleeping thread costs a wake-up per region: copy.toml's training
// takes 1.6-2x as long with OMP_WAIT_POLICY=passive on a 2-core KVM guest). On a core another
// process keeps busy it is the slowest: the spinning thread spends its share of that core, the
// scheduler then runs the other process when the thread has real work, and its partner waits at
// every barrier (copy.toml with --threads 2 beside one busy core: 3x as long as --threads 1
// spinning, 1.2x sleeping). docs/performance.md has the measurements.
//
// So an executable that declares QKV_OPENMP_WAIT_AT_START (the qkv binary does) looks at the
// machine before libgomp loads: when another thread is runnable at that moment (min over three
// looks 1 ms apart) it sets OMP_WAIT_POLICY=passive; otherwise it leaves libgomp's default. It
// never overrides OMP_WAIT_POLICY or GOMP_SPINCOUNT set by the user. The choice holds for the
// whole process (libgomp reads the variable once, when it loads); it changes timing only, never
// a result. A program linking qkv's libraries without the macro keeps libgomp's default.
#pragma once
#include <string>

namespace qkv {

struct OpenMPWait {
  std::string
      policy;       // "spin", "passive", or the user's "OMP_WAIT_POLICY=..."/"GOMP_SPINCOUNT=..."
  std::string why;  // one line, for provenance.json and `qkv bench`
};
// What this process runs with.
OpenMPWait openmp_wait();

// The decision, from /proc/loadavg's text ("0.52 0.48 0.50 3/152 4711": 3 runnable threads,
// this one included) read three times: how many other threads were runnable in every look
// (-1 when a text cannot be read).
int others_runnable(const char* const loadavgs[3]);

// Called from an executable's .preinit_array, before any shared library's constructor (so
// before libgomp reads its environment).
void choose_openmp_wait(int argc, char** argv, char** envp);

}  // namespace qkv

// In the executable's main file, at namespace scope.
#define QKV_OPENMP_WAIT_AT_START                                                         \
  __attribute__((section(".preinit_array"), used)) static void (*qkv_openmp_wait_entry)( \
      int, char**, char**) = &qkv::choose_openmp_wait;
