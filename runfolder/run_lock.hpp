// One writer per run folder: `qkv train` (new runs and --resume) holds an exclusive flock on
// RUN/.lock for as long as it writes the folder. A second writer fails at once with one line
// naming the folder and the process that holds it; the kernel drops the lock when the holder
// exits, however it exits (even SIGKILL), so a stale lock cannot block a resume.
// Readers (eval, translate, attention) take no lock: a checkpoint is immutable once named,
// and they read a consistent one while training goes on (runfolder/integrity.hpp).
#pragma once
#include <string>

namespace qkv::run {

class RunLock {
 public:
  // Takes the lock on run_dir/.lock (creating the file; run_dir must exist) or throws
  // qkv::Error "train: run folder R is in use: process P is writing it (...)".
  explicit RunLock(const std::string& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

// The process holding a flock on path (from /proc/locks), or 0 when unknown.
long lock_holder(const std::string& path);

}  // namespace qkv::run
