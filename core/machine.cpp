// The machine's limits (core/machine.hpp): memory from /proc and the cgroup, cores from the
// affinity mask.
#include "core/machine.hpp"

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "core/error.hpp"

namespace qkv {

namespace {

// "Key:   12345 kB" from a /proc file, in bytes (-1 if absent).
double proc_kib(const char* file, const char* key) {
  std::ifstream in(file);
  std::string line;
  const std::string k = std::string(key) + ":";
  while (std::getline(in, line))
    if (line.rfind(k, 0) == 0) return std::atof(line.c_str() + k.size()) * 1024.0;
  return -1;
}

double file_number(const char* path) {
  std::ifstream in(path);
  std::string s;
  if (!(in >> s) || s == "max") return -1;
  return std::atof(s.c_str());
}

}  // namespace

MemoryInfo available_memory() {
  MemoryInfo m{proc_kib("/proc/meminfo", "MemAvailable"), "MemAvailable"};
  if (m.available < 0) m = {proc_kib("/proc/meminfo", "MemFree"), "MemFree"};
  auto consider = [&](double limit, double used, const char* source) {
    if (limit <= 0 || limit >= 1e18 || used < 0) return;  // no limit
    const double left = std::max(0.0, limit - used);
    if (m.available < 0 || left < m.available) m = {left, source};
  };
  consider(file_number("/sys/fs/cgroup/memory.max"), file_number("/sys/fs/cgroup/memory.current"),
           "cgroup memory limit");
  consider(file_number("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
           file_number("/sys/fs/cgroup/memory/memory.usage_in_bytes"), "cgroup memory limit");
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
    consider(static_cast<double>(as.rlim_cur), proc_kib("/proc/self/status", "VmSize"),
             "ulimit -v");
  if (m.available < 0) m = {1e18, "unknown"};
  return m;
}

std::string human_bytes(double b) {
  const char* unit[] = {"bytes", "KB", "MB", "GB", "TB", "PB", "EB"};
  int u = 0;
  while (b >= 1000 && u < 6) b /= 1000, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, unit[u]);
  return buf;
}

void require_memory(const std::string& key, double bytes, const std::string& what) {
  const MemoryInfo m = available_memory();
  if (bytes <= m.available) return;
  throw Error(key + ": " + what + " needs about " + human_bytes(bytes) + ", more than the " +
              human_bytes(m.available) + " of memory available (" + m.source + ")");
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

}  // namespace qkv
