// Cancelling work between passes: a request whose client went away, a server stopping.
//
// Work that runs many forward passes (a decode, a sample, a split's batches, a head table)
// calls cancellation_point() at each pass boundary. With no token in scope on the calling
// thread that is one thread-local pointer test, so commands and training pay nothing. Inside a
// CancelScope it asks the token, which may poll (serve/ looks at the client's socket there),
// and throws Cancelled once the token is cancelled: the work stops within one pass, and every
// scope it opened (precision, hooks, eval mode, locks) unwinds as for any exception.
//
//   CancelToken token;                 // token.cancel("the server is stopping") from any thread
//   {
//     CancelScope scope(token);        // this thread's passes answer to token
//     inf->generate(...);              // throws Cancelled at the next token once cancelled
//   }
//
// Threads: a token may be cancelled from any thread; its poll runs on the thread that checks.
// OpenMP workers never check (pass boundaries are on the calling thread, between kernels).
#pragma once
#include <atomic>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>

namespace qkv {

// What cancellation_point() throws. Not a qkv::Error: nothing was asked wrongly, so code that
// turns a library error into a message for bad input (serve's 400s, an attribution's reason)
// does not take it for one.
class Cancelled : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CancelToken {
 public:
  // poll, when set, runs at each check on the checking thread before the flag is read (it may
  // call cancel()); it must be cheap: a flag, a poll of a socket that does not wait.
  explicit CancelToken(std::function<void(CancelToken&)> poll = {}) : poll_(std::move(poll)) {}
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  // From any thread; the first reason is kept. The work stops at its next pass boundary.
  void cancel(const std::string& why);
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  std::string reason() const;
  // Runs the poll, then throws Cancelled(reason) when cancelled.
  void check();

 private:
  std::function<void(CancelToken&)> poll_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;  // reason_
  std::string reason_;
};

// The calling thread's passes answer to token until destroyed (the previous token, if any,
// comes back then). The token must outlive the scope.
class CancelScope {
 public:
  explicit CancelScope(CancelToken& token);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  CancelToken* previous_;
};

namespace detail {
extern thread_local CancelToken* t_cancel_token;
}

// A pass boundary: throws Cancelled when the calling thread's token (CancelScope) is
// cancelled; nothing without one.
inline void cancellation_point() {
  if (detail::t_cancel_token) detail::t_cancel_token->check();
}

}  // namespace qkv
