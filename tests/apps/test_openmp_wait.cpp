// The qkv binary chooses how OpenMP's idle threads wait before libgomp loads
// (core/openmp_wait.hpp): passive beside a busy core, and never over the user's own setting.
// libgomp prints what it runs with under OMP_DISPLAY_ENV=true.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/process.hpp"

using namespace qkv::testing;

namespace {

// A child process spinning on one core until killed.
struct Spinner {
  pid_t pid;
  Spinner() : pid(::fork()) {
    if (pid == 0)
      for (;;) asm volatile("" ::: "memory");  // a loop the compiler keeps
  }
  ~Spinner() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

// What libgomp in `qkv --version` run under env (VAR=VALUE words) says it waits with: its
// OMP_WAIT_POLICY and GOMP_SPINCOUNT lines (OMP_DISPLAY_ENV=verbose), e.g. "ACTIVE 30000000000".
// Unset, libgomp shows PASSIVE with its default spin count 300000; passive spins 0.
std::string waits_with(const std::string& env) {
  const std::string cmd =
      "env " + env + " OMP_DISPLAY_ENV=verbose '" + qkv_binary() + "' --version 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  REQUIRE(::pclose(p) == 0);
  auto value = [&](const std::string& key) {
    const size_t at = out.find("  " + key + " = '");
    REQUIRE(at != std::string::npos);
    const size_t from = at + key.size() + 6;
    return out.substr(from, out.find('\'', from) - from);
  };
  return value("OMP_WAIT_POLICY") + " " + value("GOMP_SPINCOUNT");
}

}  // namespace

TEST_CASE("qkv beside a busy core: idle OpenMP threads sleep") {
  const Spinner busy;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the spinner is running
  CHECK(waits_with("") == "PASSIVE 0");
}

TEST_CASE("qkv keeps OMP_WAIT_POLICY and GOMP_SPINCOUNT set by the user") {
  const Spinner busy;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(waits_with("OMP_WAIT_POLICY=active") == "ACTIVE 30000000000");
  // a spin count of the user's own: qkv sets no policy beside it (passive would make it 0)
  CHECK(waits_with("GOMP_SPINCOUNT=1000") == "PASSIVE 1000");
}

TEST_CASE("qkv with nothing in its environment to borrow keeps libgomp's default") {
  const Spinner busy;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(waits_with("-i") == "PASSIVE 300000");
}

TEST_CASE("a run records in provenance.json how its OpenMP threads waited") {
  const Spinner busy;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const TempDir dir("openmp_wait");
  const std::string run = dir.file("run");
  const RunResult r =
      run_qkv("train " + shipped_config("copy.toml") + " --run-dir '" + run +
              "' --quiet --train.max_steps 2 --optim.warmup 1 --train.eval_examples 20");
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::ifstream in(run + "/provenance.json");
  const auto p = nlohmann::json::parse(in);
  CHECK(p["openmp_wait"]["policy"] == "passive");
  CHECK(p["openmp_wait"]["why"].get<std::string>().find("runnable") != std::string::npos);
}
