// What this qkv was built from, filled in at build time (cmake/build_info.cmake): the version,
// the git commit and `git describe --dirty` of the sources ("unknown" when they are not a git
// checkout), and the compiler.
#pragma once

namespace qkv::run {

extern const char* const kQkvVersion;   // "0.1.0"
extern const char* const kGitCommit;    // 40 hex digits, or "unknown"
extern const char* const kGitDescribe;  // "7369057-dirty", or "unknown"
extern const char* const kCompiler;     // "GNU 12.2.0"

}  // namespace qkv::run
