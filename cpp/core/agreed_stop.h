// A stop every rank of a job agrees on (fastmts.AgreedStop, opt-in). With it,
// a rank's stop request (a hook's, a preemption signal's) is only its wish:
// the rank keeps stepping, and every `every_n_steps` steps, after the step's
// hooks, each rank runs the vote, its own small run of an op the engine built
// in the graph (Horovod's allreduce, TF's collective all_reduce): the maximum
// over the ranks of each one's wish. Once it is not 0, every rank stops after
// that same step. Without an agreement nothing here runs.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/run_plan.h"

namespace fastmts {

class StopAgreement {
 public:
  struct Config {
    TF_Output wish;  // an int32 scalar the vote reduces (a placeholder)
    TF_Output vote;  // its maximum over every rank
    int64_t every_n_steps = 1;
  };

  explicit StopAgreement(Config config);

  // This rank wishes to stop: `value` 1 for a stop request, or the exit code
  // its stop means (128 + a preemption signal); the largest wish is kept.
  // Lock-free: a signal handler may call it.
  void wish(int32_t value);
  int32_t wished() const { return wish_.load(std::memory_order_acquire); }

  // After each completed step of the session (one thread steps it): every
  // n-th step runs the vote on `runner`; true when the ranks agreed to stop.
  bool after_step(const SessionRunner& runner);

  // The vote that stopped the ranks (the largest wish), 0 before.
  int32_t outcome() const { return outcome_.load(std::memory_order_acquire); }
  int64_t steps() const { return steps_.load(std::memory_order_relaxed); }
  int64_t votes() const { return votes_.load(std::memory_order_relaxed); }
  int64_t every_n_steps() const { return every_n_steps_; }

 private:
  PlanPtr plan_;
  FeedPlanPtr feed_plan_;
  int64_t every_n_steps_;
  std::atomic<int32_t> wish_{0};
  std::atomic<int32_t> outcome_{0};
  std::atomic<int64_t> steps_{0};
  std::atomic<int64_t> votes_{0};
};

}  // namespace fastmts
