// Reading the files of a run folder (config, vocabularies, metrics.jsonl, checkpoints and their
// pointers, provenance.json): one reader for serve, report, eval, translate, generate, average
// and resume, so that nothing a folder holds can hang or exhaust any of them. A file is opened
// without blocking (a FIFO cannot make the open wait), must be a regular file (a FIFO, a device,
// a socket or a directory, also behind a symbolic link, is refused with one line naming it), and
// no more than its bound is ever read: a checkpoint file's size recorded in its manifest, a
// metrics log's growth up to the size it had when opened, a fixed bound for the small files.
#pragma once
#include <cstdint>
#include <string>

namespace qkv::run {

// Bounds of the files a run folder holds (bytes).
inline constexpr uint64_t kMaxPointerBytes = 4096;           // checkpoints/latest, best
inline constexpr uint64_t kMaxSmallJsonBytes = 16ull << 20;  // manifest, state, provenance
inline constexpr uint64_t kMaxVocabBytes = 1ull << 30;       // src_vocab.txt, tgt_vocab.txt

// One open file of a run folder. qkv::Error "PATH: not a WHAT (it is a FIFO)" (a device, ...)
// unless it is a regular file; "PATH: cannot read the WHAT (reason)" when it cannot be opened.
class RunFile {
 public:
  RunFile(const std::string& path, const std::string& what);
  ~RunFile();
  RunFile(const RunFile&) = delete;
  RunFile& operator=(const RunFile&) = delete;

  // The size when opened (fstat): nothing past it is ever read.
  uint64_t size() const { return size_; }
  // Up to max_bytes from offset, never past size(); short only at the end of the file.
  std::string read(uint64_t offset, uint64_t max_bytes) const;
  // The whole file; qkv::Error "PATH: N bytes, more than the M a WHAT may hold" when larger.
  std::string read_all(uint64_t max_bytes) const;

 private:
  std::string path_, what_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// RunFile(path, what).read_all(max_bytes).
std::string read_run_file(const std::string& path, const std::string& what, uint64_t max_bytes);

}  // namespace qkv::run
