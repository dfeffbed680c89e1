#include "binding/benchmark_binding.h"

#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "binding/python_conversion.h"
#include "core/run_plan.h"
#include "tf_access/tf_python_handles.h"

namespace py = pybind11;

namespace fastmts {
namespace {

// `steps` bare TF_SessionRun calls in C++, outputs dropped; seconds taken.
// With `reread`, also the hooks' own re-reads of the global step: after
// step i, one run of `reread` in the calling thread, as native hooks make
// it, for each time i % reread_period is in `reread_at` (two hooks re-reading
// after one step: listed twice). With `periodic`, step i runs
// that plan instead when i % periodic_period == 0 (a step that also fetches
// the summaries). With `feed_plan`, every step feeds `feed_values`, converted
// once before the loop: the least TF work a fed step can be.
double floor_loop(py::handle tf_session, const std::shared_ptr<RunPlan>& plan, int64_t steps,
                  const std::shared_ptr<RunPlan>& reread, int64_t reread_period,
                  const std::vector<int64_t>& reread_at, const std::shared_ptr<RunPlan>& periodic,
                  int64_t periodic_period, py::handle feed_plan, py::handle feed_values) {
  if (reread && reread_period <= 0) throw py::value_error("reread_period must be > 0");
  if (periodic && periodic_period <= 0) throw py::value_error("periodic_period must be > 0");
  SessionRunner runner(session_pointer(tf_session));
  const RunRequest feeds = request_from_python(py::none(), feed_plan, feed_values, py::none());
  const std::vector<TF_Output> inputs =
      feeds.feed_plan ? feeds.feed_plan->keys : std::vector<TF_Output>();
  std::vector<TF_Tensor*> values;
  for (const TensorPtr& value : feeds.feed_values) values.push_back(value.get());
  static const std::string kNoOptions;
  const std::vector<char> keep_none(plan->fetches.size(), 0);  // outputs are only dropped
  const std::vector<char> keep_none_periodic(periodic ? periodic->fetches.size() : 0, 0);
  std::vector<int> reread_step(reread ? reread_period : 0, 0);
  if (reread)
    for (int64_t at : reread_at) ++reread_step.at(at);
  RunRequest read;
  read.plan = reread;
  read.run_options = kRunInCallerThread;
  RunResult result;
  py::gil_scoped_release nogil;
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    if (periodic && i % periodic_period == 0)
      runner.run(inputs, values, periodic->fetches, periodic->targets, kNoOptions, false, &result,
                 &keep_none_periodic);
    else
      runner.run(inputs, values, plan->fetches, plan->targets, kNoOptions, false, &result,
                 &keep_none);
    if (reread)
      for (int k = reread_step[i % reread_period]; k > 0; --k) runner.run(read);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void register_benchmarking(py::module_& m) {
  m.def("floor_loop", &floor_loop, py::arg("tf_session"), py::arg("plan"), py::arg("steps"),
        py::arg("reread") = nullptr, py::arg("reread_period") = 0,
        py::arg("reread_at") = std::vector<int64_t>(), py::arg("periodic") = nullptr,
        py::arg("periodic_period") = 0, py::arg("feed_plan") = py::none(),
        py::arg("feed_values") = py::none(),
        "The speed floor: `steps` bare TF_SessionRun calls of `plan` in C++; seconds taken.");
}

}  // namespace fastmts
