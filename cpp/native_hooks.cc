#include "native_hooks.h"

#include <stdexcept>

namespace fastmts {

int64_t scalar_as_int64(const TF_Tensor* t) {
  const void* data = TF_TensorData(t);
  switch (TF_TensorType(t)) {
    case TF_INT64: return *static_cast<const int64_t*>(data);
    case TF_INT32: return *static_cast<const int32_t*>(data);
    case TF_UINT64: return static_cast<int64_t>(*static_cast<const uint64_t*>(data));
    case TF_UINT32: return *static_cast<const uint32_t*>(data);
    default: throw std::invalid_argument("global step must be an integer scalar");
  }
}

StopAtStepHook::StopAtStepHook(TF_Output global_step, int64_t num_steps, int64_t last_step)
    : read_step_(std::make_shared<RunPlan>(RunPlan{{global_step}, {}})),
      num_steps_(num_steps),
      last_step_(last_step) {}

void StopAtStepHook::after_create_session(const SessionRunner& session) {
  if (last_step_ >= 0) return;  // kept across re-created sessions, as in TF
  RunRequest read;
  read.plan = read_step_;
  last_step_ = scalar_as_int64(session.run(read).outputs.at(0).get()) + num_steps_;
}

void StopAtStepHook::before_run(StepContext&, RunRequest& request) { request.plan = read_step_; }

void StopAtStepHook::after_run(StepContext& ctx, const std::vector<SharedTensor>* outputs,
                               const std::string&) {
  // The value read may predate this step's increment: as TF does, confirm
  // with a fresh read before stopping.
  if (scalar_as_int64(outputs->at(0).get()) + 1 < last_step_) return;
  RunRequest read;
  read.plan = read_step_;
  if (scalar_as_int64(ctx.session().run(read).outputs.at(0).get()) >= last_step_)
    ctx.request_stop();
}

}  // namespace fastmts
