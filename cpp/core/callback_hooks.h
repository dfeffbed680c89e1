// Stock hooks with no per-step decision to make natively: each runs one
// action of TF's own Python hook, at the point where TF's hook would.
#pragma once

#include <functional>
#include <tuple>
#include <utility>

#include "core/hook_config.h"
#include "core/hooked_session.h"

namespace fastmts {

// TF's FinalOpsHook: nothing per step; `end` (TF's own end) runs the final ops.
class EndOnlyHook : public Hook {
 public:
  static constexpr const char* kName = "EndOnlyHook";
  struct Config {
    std::function<void()> end;
    static auto fields() { return std::make_tuple(field("end", &Config::end)); }
  };
  explicit EndOnlyHook(Config config) : end_(std::move(config.end)) {}
  void end(const SessionRunner&) override { end_(); }

 private:
  std::function<void()> end_;
};

// TF's FeedFnHook: before each step, `feeds` fills the step's feeds from the
// user's feed_fn (Python by nature, so called every step).
class FeedFnHook : public Hook {
 public:
  static constexpr const char* kName = "FeedFnHook";
  struct Config {
    RunRequestFill feeds;
    static auto fields() { return std::make_tuple(field("feeds", &Config::feeds)); }
  };
  explicit FeedFnHook(Config config) : feed_(std::move(config.feeds.fn)) {}
  void before_run(StepContext&, RunRequest& request) override { feed_(request); }

 private:
  std::function<void(RunRequest&)> feed_;
};

// TF's GlobalStepWaiterHook: until the worker has started, `wait` (TF's own
// before_run, which polls the global step) runs before each step and says
// whether it has; from then on the hook does nothing.
class GlobalStepWaiterHook : public Hook {
 public:
  static constexpr const char* kName = "GlobalStepWaiterHook";
  struct Config {
    std::function<bool()> wait;
    static auto fields() { return std::make_tuple(field("wait", &Config::wait)); }
  };
  explicit GlobalStepWaiterHook(Config config) : wait_(std::move(config.wait)) {}
  void before_run(StepContext&, RunRequest&) override {
    if (!started_) started_ = wait_();
  }

 private:
  std::function<bool()> wait_;
  bool started_ = false;
};

}  // namespace fastmts
