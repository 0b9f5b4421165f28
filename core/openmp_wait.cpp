#include "core/openmp_wait.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace qkv {
namespace {

// Written before main and before C++ constructors run: plain zero-initialised storage only.
char g_policy[64];
char g_why[192];

// The "R/T" field's R of one /proc/loadavg text; -1 when absent.
int runnable(const char* text) {
  if (!text) return -1;
  int fields = 0;
  const char* p = text;
  while (*p && fields < 3) {  // skip the three load averages
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;
    ++fields;
  }
  while (*p == ' ') ++p;
  if (*p < '0' || *p > '9') return -1;
  int r = 0;
  while (*p >= '0' && *p <= '9') r = r * 10 + (*p++ - '0');
  return *p == '/' ? r : -1;
}

// /proc/loadavg into buf (NUL-terminated); false when it cannot be read.
bool read_loadavg(char* buf, int size) {
  const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::read(fd, buf, size - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

void set(const char* policy, const char* why) {
  std::snprintf(g_policy, sizeof g_policy, "%s", policy);
  std::snprintf(g_why, sizeof g_why, "%s", why);
}

// The value of name in envp, or null. (getenv cannot be used yet: libc sets its environment
// pointer after the executable's .preinit_array has run.)
const char* env_value(char** envp, const char* name) {
  const size_t n = std::strlen(name);
  for (char** e = envp; e && *e; ++e)
    if (std::strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  return nullptr;
}

// The environment is the array the kernel put on the stack, and libc adopts that same array
// after .preinit_array: a variable cannot be added to it there (setenv's copy is dropped). So
// the passive policy borrows the slot of a variable no library reads while it loads, and the
// slot is given back, with OMP_WAIT_POLICY set properly, once every library's constructor has
// run (give_back_borrowed_slot below).
char** g_envp;
int g_slot = -1;
char* g_borrowed;
char g_passive[] = "OMP_WAIT_POLICY=passive";

int spare_slot(char** envp) {
  for (const char* name : {"_", "SHLVL", "OLDPWD", "PWD", "TERM", "SHELL", "LOGNAME", "USER"})
    for (int i = 0; envp && envp[i]; ++i)
      if (std::strncmp(envp[i], name, std::strlen(name)) == 0 && envp[i][std::strlen(name)] == '=')
        return i;
  return -1;
}

// After every shared library's constructor (libgomp has read OMP_WAIT_POLICY): the borrowed
// variable back, and OMP_WAIT_POLICY in the environment for getenv and child processes.
__attribute__((constructor)) void give_back_borrowed_slot() {
  if (g_slot < 0) return;
  g_envp[g_slot] = g_borrowed;
  g_slot = -1;
  ::setenv("OMP_WAIT_POLICY", "passive", 0);
}

}  // namespace

int others_runnable(const char* const loadavgs[3]) {
  int least = -1;
  for (int i = 0; i < 3; ++i) {
    const int r = runnable(loadavgs[i]);
    if (r < 1) return -1;  // this thread is runnable as it reads: 0 is not a real reading
    least = least < 0 ? r - 1 : (r - 1 < least ? r - 1 : least);
  }
  return least;
}

void choose_openmp_wait(int, char**, char** envp) {
  for (const char* var : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
    if (const char* v = env_value(envp, var)) {
      char policy[64];
      std::snprintf(policy, sizeof policy, "%s=%s", var, v);
      return set(policy, "set in the environment");
    }
  char texts[3][128];
  const char* looks[3] = {nullptr, nullptr, nullptr};
  for (int i = 0; i < 3; ++i) {
    if (i > 0) {
      const timespec ms{0, 1000000};
      ::nanosleep(&ms, nullptr);
    }
    if (read_loadavg(texts[i], sizeof texts[i])) looks[i] = texts[i];
  }
  const int others = others_runnable(looks);
  if (others < 0) return set("spin", "/proc/loadavg could not be read: libgomp's default (spin)");
  if (others == 0)
    return set("spin",
               "no other thread was runnable when qkv started: idle threads spin (libgomp's "
               "default)");
  const int slot = spare_slot(envp);
  if (slot < 0)
    return set("spin",
               "another thread was runnable at start, but the environment had no entry "
               "to borrow for OMP_WAIT_POLICY: libgomp's default (spin)");
  g_envp = envp;
  g_slot = slot;
  g_borrowed = envp[slot];
  envp[slot] = g_passive;
  char why[192];
  std::snprintf(why, sizeof why,
                "%d other thread(s) were runnable when qkv started: idle threads sleep "
                "(OMP_WAIT_POLICY=passive)",
                others);
  set("passive", why);
}

OpenMPWait openmp_wait() {
  if (!g_policy[0])
    return {"libgomp's default",
            "not chosen at start (a program without QKV_OPENMP_WAIT_AT_START)"};
  return {g_policy, g_why};
}

}  // namespace qkv
