// What the tests of StepCounterHook's rates share (step_counter_hook_test.cc,
// step_rate_batch_test.cc): a hand-over to `record` as the test keeps it, and
// rates compared and printed field by field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/step_rate_batch.h"

namespace fastmts {
namespace testing {

using Rate = StepRateBatch::StepRate;

struct Record {
  std::vector<Rate> rates;
  std::optional<int64_t> timer_last_step;
  double timer_last_time;
};

inline bool same_rates(const std::vector<Rate>& got, const std::vector<Rate>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].elapsed_steps != want[i].elapsed_steps ||
        got[i].elapsed_secs != want[i].elapsed_secs ||
        got[i].global_step != want[i].global_step || got[i].triggered_at != want[i].triggered_at)
      return false;
  return true;
}

inline std::string show(const std::vector<Rate>& rates) {
  std::string s;
  for (const Rate& r : rates)
    s += "{" + std::to_string(r.elapsed_steps) + " steps, " + std::to_string(r.elapsed_secs) +
         " s, step " + std::to_string(r.global_step) + ", at " + std::to_string(r.triggered_at) +
         "} ";
  return s;
}

}  // namespace testing
}  // namespace fastmts
