// Stock hooks with no per-step decision to make natively: each runs one
// action of TF's own Python hook, at the point where TF's hook would.
#pragma once

#include <functional>
#include <utility>

#include "core/hooked_session.h"

namespace fastmts {

// TF's FinalOpsHook: nothing per step; `end` (TF's own end) runs the final ops.
class EndOnlyHook : public Hook {
 public:
  explicit EndOnlyHook(std::function<void()> end) : end_(std::move(end)) {}
  void end(const SessionRunner&) override { end_(); }

 private:
  std::function<void()> end_;
};

// TF's FeedFnHook: before each step, `feed` fills the step's feeds from the
// user's feed_fn (Python by nature, so called every step).
class FeedFnHook : public Hook {
 public:
  explicit FeedFnHook(std::function<void(RunRequest&)> feed) : feed_(std::move(feed)) {}
  void before_run(StepContext&, RunRequest& request) override { feed_(request); }

 private:
  std::function<void(RunRequest&)> feed_;
};

// TF's GlobalStepWaiterHook: until the worker has started, `wait` (TF's own
// before_run, which polls the global step) runs before each step and says
// whether it has; from then on the hook does nothing.
class GlobalStepWaiterHook : public Hook {
 public:
  explicit GlobalStepWaiterHook(std::function<bool()> wait) : wait_(std::move(wait)) {}
  void before_run(StepContext&, RunRequest&) override {
    if (!started_) started_ = wait_();
  }

 private:
  std::function<bool()> wait_;
  bool started_ = false;
};

}  // namespace fastmts
