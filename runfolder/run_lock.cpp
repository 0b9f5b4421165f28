#include "runfolder/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace qkv::run {

long lock_holder(const std::string& path) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) return 0;
  // A line of /proc/locks: "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
  // (the device's major:minor in hex, then the inode in decimal).
  std::ifstream in("/proc/locks");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string id, kind, mode, access, dev;
    long pid = 0;
    if (!(s >> id >> kind >> mode >> access >> pid >> dev) || kind != "FLOCK") continue;
    unsigned major = 0, minor = 0;
    unsigned long long inode = 0;
    if (std::sscanf(dev.c_str(), "%x:%x:%llu", &major, &minor, &inode) != 3) continue;
    if (inode == sb.st_ino && major == ::major(sb.st_dev) && minor == ::minor(sb.st_dev))
      return pid;
  }
  return 0;
}

RunLock::RunLock(const std::string& run_dir) {
  const std::string path = run_dir + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error("train: " + path + ": cannot create the run folder's lock file (" +
                std::strerror(errno) + ")");
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  const int err = errno;
  ::close(fd_);
  fd_ = -1;
  if (err != EWOULDBLOCK)
    throw Error("train: " + path + ": cannot lock the run folder (" + std::strerror(err) + ")");
  const long pid = lock_holder(path);
  throw Error("train: run folder " + run_dir + " is in use: " +
              (pid > 0 ? "process " + std::to_string(pid) : std::string("another process")) +
              " is writing it (qkv train or --resume holds " + path +
              "); wait for it to finish or stop it, or choose another --run-dir");
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace qkv::run
