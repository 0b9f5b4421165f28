// The questions' lanes per run (see queue.hpp).
#include "serve/queue.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace qkv::serve {

namespace {
const char* lane_name(Lane lane) { return lane == Lane::long_work ? "long" : "short"; }
}  // namespace

Scheduler::Ticket::~Ticket() { s_.leave(run_, lane_); }

void Scheduler::refuse(RunState& r, const std::string& why) {
  ++r.refused;
  throw Busy(cat(why, ": ask again in ", lim_.retry_after_seconds, " s"), lim_.retry_after_seconds);
}

std::unique_ptr<Scheduler::Ticket> Scheduler::enter(const std::string& run, Lane lane,
                                                    CancelToken& token) {
  std::unique_lock<std::mutex> hold(mu_);
  RunState& r = runs_[run];
  LaneState& l = lane_of(run, lane);
  if (admitted_ >= lim_.total)
    refuse(r, cat("the server has ", admitted_, " questions running or waiting, its bound"));
  if (l.running >= lim_.running && static_cast<int>(l.waiting.size()) >= lim_.waiting)
    refuse(r, cat(run, " has ", l.running, " ", lane_name(lane), " questions running and ",
                  l.waiting.size(), " waiting, the server's bound per run"));
  const uint64_t me = ++next_;
  l.waiting.push_back(me);
  ++admitted_;
  while (l.waiting.front() != me || l.running >= lim_.running) {
    changed_.wait_for(hold, kPoll);
    if (l.waiting.front() == me && l.running < lim_.running) break;
    hold.unlock();  // the token may poll a socket: not under the lock
    std::string why;
    try {
      token.check();
    } catch (const Cancelled& e) {
      why = e.what();
    }
    hold.lock();
    if (!why.empty() || token.cancelled()) {
      l.waiting.erase(std::find(l.waiting.begin(), l.waiting.end(), me));
      --admitted_;
      changed_.notify_all();  // the next in line may be first now
      throw Cancelled(why.empty() ? token.reason() : why);
    }
  }
  l.waiting.pop_front();
  ++l.running, ++running_;
  changed_.notify_all();  // the next in line is first now
  return std::unique_ptr<Ticket>(new Ticket(*this, run, lane));
}

void Scheduler::leave(const std::string& run, Lane lane) {
  std::lock_guard<std::mutex> hold(mu_);
  --lane_of(run, lane).running;
  --running_, --admitted_;
  changed_.notify_all();
}

int Scheduler::running() const {
  std::lock_guard<std::mutex> hold(mu_);
  return running_;
}

void Scheduler::wake_all() {
  std::lock_guard<std::mutex> hold(mu_);
  changed_.notify_all();
}

void Scheduler::count_cancelled(const std::string& run) {
  std::lock_guard<std::mutex> hold(mu_);
  ++runs_[run].cancelled;
}

nlohmann::json Scheduler::stats(const std::string& run) const {
  std::lock_guard<std::mutex> hold(mu_);
  const auto it = runs_.find(run);
  const RunState none;
  const RunState& r = it == runs_.end() ? none : it->second;
  nlohmann::json j{{"cancelled", r.cancelled}, {"refused", r.refused}};
  for (const Lane lane : {Lane::short_work, Lane::long_work}) {
    const LaneState& l = r.lanes[lane == Lane::long_work ? 1 : 0];
    j[lane_name(lane)] = {{"running", l.running},
                          {"waiting", l.waiting.size()},
                          {"max_running", lim_.running},
                          {"max_waiting", lim_.waiting}};
  }
  return j;
}

}  // namespace qkv::serve
