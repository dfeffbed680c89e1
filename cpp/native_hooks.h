// Hooks whose per-step work is all C++. Their graph-side set-up (finding the
// global step tensor, validating arguments) happens once in Python.
#pragma once

#include <cstdint>

#include "hooked_session.h"

namespace fastmts {

// Reads an integer scalar (int32 or int64) such as the global step.
int64_t scalar_as_int64(const TF_Tensor* t);

// TF's StopAtStepHook: stop once the global step reaches last_step; with
// num_steps, last_step is counted from the global step at the first session.
class StopAtStepHook : public Hook {
 public:
  // Exactly one of num_steps / last_step is >= 0.
  StopAtStepHook(TF_Output global_step, int64_t num_steps, int64_t last_step);

  void after_create_session(const SessionRunner& session) override;
  void before_run(StepContext& ctx, RunRequest& request) override;
  void after_run(StepContext& ctx, const std::vector<SharedTensor>* outputs,
                 const std::string& run_metadata) override;

  int64_t last_step() const { return last_step_; }

 private:
  PlanPtr read_step_;
  int64_t num_steps_;
  int64_t last_step_;
};

}  // namespace fastmts
