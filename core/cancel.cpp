#include "cancel.hpp"

namespace qkv {

thread_local CancelToken* detail::t_cancel_token = nullptr;

void CancelToken::cancel(const std::string& why) {
  std::lock_guard<std::mutex> hold(mu_);
  if (cancelled_.load(std::memory_order_relaxed)) return;
  reason_ = why;
  cancelled_.store(true, std::memory_order_release);
}

std::string CancelToken::reason() const {
  std::lock_guard<std::mutex> hold(mu_);
  return reason_;
}

void CancelToken::check() {
  if (poll_ && !cancelled()) poll_(*this);
  if (cancelled()) throw Cancelled(reason());
}

CancelScope::CancelScope(CancelToken& token) : previous_(detail::t_cancel_token) {
  detail::t_cancel_token = &token;
}

CancelScope::~CancelScope() { detail::t_cancel_token = previous_; }

}  // namespace qkv
