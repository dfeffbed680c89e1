#include "core/agreed_stop.h"

#include <cstring>
#include <stdexcept>

namespace fastmts {

StopAgreement::StopAgreement(Config config) : every_n_steps_(config.every_n_steps) {
  if (every_n_steps_ < 1) throw std::invalid_argument("every_n_steps must be >= 1");
  auto plan = std::make_shared<RunPlan>();
  plan->fetches.push_back(config.vote);
  plan_ = std::move(plan);
  auto feeds = std::make_shared<FeedPlan>();
  feeds->keys.push_back(config.wish);
  feeds->dtypes.push_back(TF_INT32);
  feeds->labels.push_back("agreed stop wish");
  feed_plan_ = std::move(feeds);
}

void StopAgreement::wish(int32_t value) {
  int32_t seen = wish_.load(std::memory_order_relaxed);
  while (seen < value &&
         !wish_.compare_exchange_weak(seen, value, std::memory_order_acq_rel)) {
  }
}

bool StopAgreement::after_step(const SessionRunner& runner) {
  const int64_t step = steps_.load(std::memory_order_relaxed) + 1;
  steps_.store(step, std::memory_order_relaxed);
  if (step % every_n_steps_ != 0) return false;
  RunRequest request;
  request.plan = plan_;
  request.feed_plan = feed_plan_;
  const int32_t mine = wished();
  request.feed_values.push_back(tensor_from_buffer(TF_INT32, {}, &mine, sizeof(mine)));
  const RunResult result = runner.run(request);
  votes_.store(votes_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  int32_t agreed = 0;
  std::memcpy(&agreed, tf::TensorData(result.outputs.at(0).get()), sizeof(agreed));
  if (agreed == 0) return false;
  outcome_.store(agreed, std::memory_order_release);
  return true;
}

}  // namespace fastmts
