// What this machine can give a process: the memory available to it and the cores it may run
// on, read when asked (not cached: a cgroup's limit or usage can change).
//
// Available memory: the least of /proc/meminfo's MemAvailable, the cgroup's memory limit minus
// its usage (v2 memory.max, v1 memory.limit_in_bytes) and the address-space limit (ulimit -v)
// minus the process's size.
#pragma once
#include <string>

namespace qkv {

struct MemoryInfo {
  double available = 0;  // bytes
  std::string source;    // which limit: "MemAvailable", "cgroup memory limit", "ulimit -v"
};
MemoryInfo available_memory();
std::string human_bytes(double bytes);  // "1.5 GB"

// Throws qkv::Error "KEY: WHAT needs about N, more than the M of memory available (SOURCE)"
// when bytes do not fit.
void require_memory(const std::string& key, double bytes, const std::string& what);

// The CPUs this process may run on (sched_getaffinity).
int usable_cores();

}  // namespace qkv
