// The questions asked of the served runs (translate, generate, attention, next, heads, lens):
// how many compute at once and how many wait, per run, before the rest are refused at once.
//
// A run's checkpoints answer many questions concurrently (run/inference.hpp), each on its own
// worker thread. Each run has two lanes, so that a short question never waits behind a long
// one: long questions (a sample of up to 1000 tokens, the head table's hundreds of passes) and
// short ones (one input's passes: translate, attention, next, lens). In each lane at most
// `running` questions compute at once and at most `waiting` more wait, in the order they came;
// a question past both is refused at once (Busy: a 503 with Retry-After). A waiting question
// whose token is cancelled (its client left, the server is stopping) leaves the queue within
// kPoll. Over all runs at most `total` questions are admitted, so that the server's other
// workers stay free for the page, the metrics and the files.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "core/cancel.hpp"

namespace qkv::serve {

struct QueueLimits {
  int running = 4;  // per run and lane: questions computing at once
  int waiting = 8;  // per run and lane: questions waiting for one of those places
  int total = 48;   // admitted (running or waiting) over every run and lane; of 64 workers
  int retry_after_seconds = 1;
};

enum class Lane { short_work, long_work };

// A question refused because its lane (or the server) is full: the message is one line, and
// Retry-After says when to ask again.
struct Busy : std::runtime_error {
  Busy(const std::string& why, int retry_after)
      : std::runtime_error(why), retry_after(retry_after) {}
  int retry_after;
};

class Scheduler {
 public:
  // How often a waiting question asks its token.
  static constexpr std::chrono::milliseconds kPoll{50};

  explicit Scheduler(const QueueLimits& lim) : lim_(lim) {}

  // A question's place among those computing; it leaves when destroyed.
  class Ticket {
   public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    friend class Scheduler;
    Ticket(Scheduler& s, std::string run, Lane lane) : s_(s), run_(std::move(run)), lane_(lane) {}
    Scheduler& s_;
    std::string run_;
    Lane lane_;
  };

  // A place to compute in run's lane, when one is free and no earlier question waits for it;
  // waits for it otherwise. Throws Busy at once when the lane's places and queue are full (or
  // the server's total), and Cancelled when token is cancelled while waiting (asked every
  // kPoll, and at once after wake_all()).
  std::unique_ptr<Ticket> enter(const std::string& run, Lane lane, CancelToken& token);
  // Questions computing now over every run: a question beside others computes on one thread.
  int running() const;
  // Wakes every waiting question to ask its token (the server is stopping).
  void wake_all();
  // A question of run stopped at a pass boundary (its client left, the server stopped).
  void count_cancelled(const std::string& run);
  // {"short": {"running", "waiting", "max_running", "max_waiting"}, "long": {...},
  //  "cancelled": n, "refused": n}: what GET /api/runs/NAME/queue answers.
  nlohmann::json stats(const std::string& run) const;

 private:
  struct LaneState {
    int running = 0;
    std::deque<uint64_t> waiting;  // tickets, in the order they came
  };
  struct RunState {
    LaneState lanes[2];
    int64_t cancelled = 0, refused = 0;
  };
  LaneState& lane_of(const std::string& run, Lane lane) {
    return runs_[run].lanes[lane == Lane::long_work ? 1 : 0];
  }
  void leave(const std::string& run, Lane lane);  // a Ticket's end
  [[noreturn]] void refuse(RunState& r, const std::string& why);

  QueueLimits lim_;
  mutable std::mutex mu_;  // everything below
  std::condition_variable changed_;
  std::map<std::string, RunState> runs_;
  int admitted_ = 0, running_ = 0;
  uint64_t next_ = 0;
};

}  // namespace qkv::serve
