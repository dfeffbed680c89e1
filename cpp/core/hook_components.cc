#include "core/hook_components.h"

#include <stdexcept>

namespace fastmts {

int64_t scalar_as_int64(const TF_Tensor* t) {
  const void* data = tf::TensorData(t);
  switch (tf::TensorType(t)) {
    case TF_INT64: return *static_cast<const int64_t*>(data);
    case TF_INT32: return *static_cast<const int32_t*>(data);
    case TF_UINT64: return static_cast<int64_t>(*static_cast<const uint64_t*>(data));
    case TF_UINT32: return *static_cast<const uint32_t*>(data);
    default: throw std::invalid_argument("global step must be an integer scalar");
  }
}

GlobalStepRead::GlobalStepRead(TF_Output global_step)
    : plan_(std::make_shared<RunPlan>(RunPlan{{global_step}, {}})) {}

int64_t GlobalStepRead::fresh(const SessionRunner& session) const {
  RunRequest read;
  read.plan = plan_;
  read.run_options = kRunInCallerThread;
  return scalar_as_int64(session.run(read).outputs.at(0).get());
}

}  // namespace fastmts
