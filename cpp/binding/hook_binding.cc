#include "binding/hook_binding.h"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "binding/python_conversion.h"
#include "binding/python_gil.h"
#include "binding/python_hook.h"
#include "core/callback_hooks.h"
#include "core/checkpoint_writer.h"
#include "core/native_hooks.h"
#include "tf_access/tf_python_handles.h"

namespace py = pybind11;

namespace fastmts {
namespace {

TF_Output output_of(py::handle c_op, int index) { return TF_Output{operation_pointer(c_op), index}; }

// A callback with no arguments and no result (hooks' end, say).
std::function<void()> python_action(py::function fn) {
  return holding_gil([fn]() { fn(); });
}

// A callback returning whether stop was requested.
std::function<bool()> python_stop_request(py::function fn) {
  return holding_gil([fn]() { return fn().cast<bool>(); });
}

std::function<bool(int64_t)> python_step_stop_request(py::function fn) {
  return holding_gil([fn](int64_t step) { return fn(step).cast<bool>(); });
}

std::optional<int64_t> optional_step_from(py::handle step) {
  return step.is_none() ? std::optional<int64_t>() : std::optional<int64_t>(step.cast<int64_t>());
}

std::shared_ptr<StopAtStepHook> make_stop_at_step_hook(py::object c_op, int index,
                                                       int64_t num_steps,
                                                       std::optional<int64_t> last_step,
                                                       py::function on_last_step) {
  StopAtStepHook::Config config;
  config.global_step = output_of(c_op, index);
  config.num_steps = num_steps;
  config.last_step = last_step;
  config.on_last_step = holding_gil([on_last_step](int64_t step) { on_last_step(step); });
  return std::make_shared<StopAtStepHook>(std::move(config));
}

std::shared_ptr<NanTensorHook> make_nan_tensor_hook(py::object c_op, int index,
                                                    bool fail_on_nan_loss, py::function on_nan) {
  NanTensorHook::Config config;
  config.loss = output_of(c_op, index);
  config.fail_on_nan_loss = fail_on_nan_loss;
  config.on_nan = python_action(on_nan);
  return std::make_shared<NanTensorHook>(std::move(config));
}

std::shared_ptr<LoggingTensorHook> make_logging_tensor_hook(
    const std::shared_ptr<RunPlan>& tensors, std::optional<double> every_secs,
    std::optional<double> every_steps, bool never, py::function log, py::function end) {
  LoggingTensorHook::Config config;
  config.tensors = tensors;
  config.timer = SecondOrStepTimer(every_secs, every_steps, never);
  config.log = holding_gil([log](int64_t iter, const std::vector<SharedTensor>& values) {
    log(iter, outputs_to_python(values));
  });
  config.end = python_action(end);
  return std::make_shared<LoggingTensorHook>(std::move(config));
}

// `save(fresh_step) -> bool` is TF's code for a step the gate opened on;
// `writer` (may be null) is the asynchronous checkpoint writer whose ended
// write `deliver_write() -> bool` delivers.
std::shared_ptr<CheckpointSaverHook> make_checkpoint_saver_hook(
    py::object c_op, int index, std::optional<double> every_secs,
    std::optional<double> every_steps, int64_t steps_per_run, py::function save,
    py::function after_create_session, py::function end, std::shared_ptr<CheckpointWriter> writer,
    py::object deliver_write) {
  CheckpointSaverHook::Config config;
  config.global_step = output_of(c_op, index);
  config.timer = SecondOrStepTimer(every_secs, every_steps);
  config.steps_per_run = steps_per_run;
  config.save = python_step_stop_request(save);
  config.after_create_session = python_action(after_create_session);
  config.end = python_action(end);
  if (writer) config.write_ended = [writer] { return writer->has_outcome(); };  // an atomic read, no GIL
  if (!deliver_write.is_none()) config.deliver_write = python_stop_request(deliver_write);
  return std::make_shared<CheckpointSaverHook>(std::move(config));
}

// `after_run_stuck(stale_step) -> bool` is TF's whole after_run on a step
// where the global step did not move; `record(rates, timer_last_step,
// timer_last_time)` gets the step rates counted natively, in batches.
std::shared_ptr<StepCounterHook> make_step_counter_hook(
    py::object c_op, int index, std::optional<double> every_secs,
    std::optional<double> every_steps, int64_t steps_per_run, std::optional<int64_t> last_step,
    py::function after_run_stuck, py::function record, py::function after_create_session,
    py::function end) {
  StepCounterHook::Config config;
  config.global_step = output_of(c_op, index);
  config.timer = SecondOrStepTimer(every_secs, every_steps);
  config.steps_per_run = steps_per_run;
  config.last_step = last_step;
  config.after_run_stuck = python_step_stop_request(after_run_stuck);
  config.record = holding_gil([record](const std::vector<StepCounterHook::StepRate>& rates,
                                       std::optional<int64_t> timer_last_step,
                                       double timer_last_time) {
    py::list py_rates;
    for (const auto& r : rates)
      py_rates.append(py::make_tuple(r.elapsed_steps, r.elapsed_secs, r.global_step, r.triggered_at));
    record(py_rates, optional_step(timer_last_step), timer_last_time);
  });
  config.after_create_session = python_action(after_create_session);
  config.end = python_action(end);
  return std::make_shared<StepCounterHook>(std::move(config));
}

// Whether `logger` prints INFO records now, read as Logger.isEnabledFor
// reads it (`disabled`, then its per-level cache), without running Python
// code unless the cache lacks the level.
std::function<bool()> info_logged_by(py::object logger) {
  return [logger]() {
    py::gil_scoped_acquire gil;
    constexpr int kInfo = 20;
    if (py::bool_(logger.attr("disabled"))) return false;
    py::object cache = py::getattr(logger, "_cache", py::none());
    if (PyDict_Check(cache.ptr())) {
      PyObject* known = PyDict_GetItem(cache.ptr(), py::int_(kInfo).ptr());  // borrowed
      if (known != nullptr) return PyObject_IsTrue(known) == 1;
    }
    return logger.attr("isEnabledFor")(kInfo).cast<bool>();
  };
}

// `after_run(stale_step, next_step, due, summaries) -> next step or None`:
// TF's SummarySaverHook.after_run.
std::shared_ptr<SummarySaverHook> make_summary_saver_hook(
    py::object c_op, int index, std::optional<double> every_secs,
    std::optional<double> every_steps, py::function after_run, py::function end) {
  SummarySaverHook::Config config;
  config.global_step = output_of(c_op, index);
  config.timer = SecondOrStepTimer(every_secs, every_steps);
  config.after_run = holding_gil([after_run](int64_t stale, std::optional<int64_t> next, bool due,
                                             const std::vector<SharedTensor>* summaries) {
    return optional_step_from(
        after_run(stale, optional_step(next), due,
                  summaries ? py::object(outputs_to_python(*summaries)) : py::object(py::none())));
  });
  config.end = python_action(end);
  return std::make_shared<SummarySaverHook>(std::move(config));
}

// `after_run(stale_step, next_step, due, run_metadata) -> next step or
// None`: TF's ProfilerHook.after_run (run_metadata: serialized, or None).
std::shared_ptr<ProfilerHook> make_profiler_hook(py::object c_op, int index,
                                                 std::optional<double> every_secs,
                                                 std::optional<double> every_steps,
                                                 py::function after_run, py::function end) {
  ProfilerHook::Config config;
  config.global_step = output_of(c_op, index);
  config.timer = SecondOrStepTimer(every_secs, every_steps);
  config.after_run = holding_gil([after_run](int64_t stale, std::optional<int64_t> next, bool due,
                                             const std::string& metadata) {
    return optional_step_from(
        after_run(stale, optional_step(next), due,
                  metadata.empty() ? py::object(py::none()) : py::object(py::bytes(metadata))));
  });
  config.end = python_action(end);
  return std::make_shared<ProfilerHook>(std::move(config));
}

// The timer a native hook mirrors of TF's hook object, as TF's timer keeps it
// (`timer_state`: last step or None, time) and set from it
// (`set_timer_state`): HookStateSync keeps the two in step.
template <typename NativeHook, typename PyClass>
PyClass& with_timer_state(PyClass& cls) {
  return cls
      .def_property_readonly("timer_state",
                             [](NativeHook& hook) {
                               return std::make_tuple(optional_step(hook.timer().last_step()),
                                                      hook.timer().last_time());
                             })
      .def(
          "set_timer_state",
          [](NativeHook& hook, std::optional<int64_t> last_step, double last_time) {
            hook.timer().set_state(last_step, last_time);
          },
          py::arg("last_step"), py::arg("last_time"));
}

// `feeds() -> (FeedPlan, converted values)`: the user's feed_fn, resolved.
std::shared_ptr<FeedFnHook> make_feed_fn_hook(py::function feeds) {
  return std::make_shared<FeedFnHook>(holding_gil([feeds](RunRequest& request) {
    py::tuple t = feeds();
    request = request_from_python(py::none(), t[0], t[1], py::none());
  }));
}

std::shared_ptr<GlobalStepWaiterHook> make_global_step_waiter_hook(py::function wait) {
  return std::make_shared<GlobalStepWaiterHook>(
      holding_gil([wait]() { return wait().cast<bool>(); }));
}

// The hooks that follow the global step on TF's timer: CheckpointSaverHook
// and StepCounterHook (a GlobalStepGate), SummarySaverHook and ProfilerHook
// (a StepSchedule).
void register_global_step_hooks(py::module_& m) {
  py::class_<CheckpointSaverHook, Hook, std::shared_ptr<CheckpointSaverHook>> checkpoint_saver(
      m, "CheckpointSaverHook");
  checkpoint_saver.def(py::init(&make_checkpoint_saver_hook), py::kw_only(),
                       py::arg("global_step_op"), py::arg("global_step_index"),
                       py::arg("every_secs"), py::arg("every_steps"), py::arg("steps_per_run"),
                       py::arg("save"), py::arg("after_create_session"), py::arg("end"),
                       py::arg("writer") = nullptr, py::arg("deliver_write") = py::none());
  with_timer_state<CheckpointSaverHook>(checkpoint_saver);

  py::class_<StepCounterHook, Hook, std::shared_ptr<StepCounterHook>> step_counter(
      m, "StepCounterHook");
  step_counter
      .def(py::init(&make_step_counter_hook), py::kw_only(), py::arg("global_step_op"),
           py::arg("global_step_index"), py::arg("every_secs"), py::arg("every_steps"),
           py::arg("steps_per_run"), py::arg("last_step"), py::arg("after_run_stuck"),
           py::arg("record"), py::arg("after_create_session"), py::arg("end"))
      .def_property_readonly("last_step",
                             [](const StepCounterHook& h) { return optional_step(h.last_step()); })
      .def(
          "set_summary_writer",
          [](StepCounterHook& h, std::shared_ptr<SummaryWriter> writer, std::string tag,
             py::object logger) {
            h.set_summary_writer(std::move(writer), std::move(tag), info_logged_by(logger));
          },
          py::arg("writer"), py::arg("tag"), py::arg("logger"));
  with_timer_state<StepCounterHook>(step_counter);

  py::class_<SummarySaverHook, Hook, std::shared_ptr<SummarySaverHook>> summary_saver(
      m, "SummarySaverHook");
  summary_saver
      .def(py::init(&make_summary_saver_hook), py::kw_only(), py::arg("global_step_op"),
           py::arg("global_step_index"), py::arg("every_secs"), py::arg("every_steps"),
           py::arg("after_run"), py::arg("end"))
      .def("set_summaries", &SummarySaverHook::set_summaries, py::arg("plan"))
      .def("set_summary_writer", &SummarySaverHook::set_summary_writer, py::arg("writer"))
      .def_property_readonly("next_step", &SummarySaverHook::next_step);
  with_timer_state<SummarySaverHook>(summary_saver);

  py::class_<ProfilerHook, Hook, std::shared_ptr<ProfilerHook>> profiler(m, "ProfilerHook");
  profiler
      .def(py::init(&make_profiler_hook), py::kw_only(), py::arg("global_step_op"),
           py::arg("global_step_index"), py::arg("every_secs"), py::arg("every_steps"),
           py::arg("after_run"), py::arg("end"))
      .def_property_readonly("next_step", &ProfilerHook::next_step);
  with_timer_state<ProfilerHook>(profiler);
}

}  // namespace

void register_hooks(py::module_& m) {
  py::class_<Hook, HookPtr>(m, "Hook");
  py::class_<PythonHook, Hook, std::shared_ptr<PythonHook>>(m, "PythonHook")
      .def(py::init<py::object, py::object>(), py::arg("hook"), py::arg("runner"));

  py::class_<StopAtStepHook, Hook, std::shared_ptr<StopAtStepHook>>(m, "StopAtStepHook")
      .def(py::init(&make_stop_at_step_hook), py::kw_only(), py::arg("global_step_op"),
           py::arg("global_step_index"), py::arg("num_steps"), py::arg("last_step"),
           py::arg("on_last_step"));

  py::class_<NanTensorHook, Hook, std::shared_ptr<NanTensorHook>>(m, "NanTensorHook")
      .def(py::init(&make_nan_tensor_hook), py::kw_only(), py::arg("loss_op"),
           py::arg("loss_index"), py::arg("fail_on_nan_loss"), py::arg("on_nan"));

  py::class_<LoggingTensorHook, Hook, std::shared_ptr<LoggingTensorHook>> logging_tensor(
      m, "LoggingTensorHook");
  logging_tensor
      .def(py::init(&make_logging_tensor_hook), py::kw_only(), py::arg("tensors"),
           py::arg("every_secs"), py::arg("every_steps"), py::arg("never"), py::arg("log"),
           py::arg("end"))
      .def_property_readonly("iter_count", &LoggingTensorHook::iter_count)
      .def(
          "set_quiet_unless_logged_by",
          [](LoggingTensorHook& h, py::object logger) { h.set_quiet_unless(info_logged_by(logger)); },
          py::arg("logger"));
  with_timer_state<LoggingTensorHook>(logging_tensor);

  register_global_step_hooks(m);

  py::class_<EndOnlyHook, Hook, std::shared_ptr<EndOnlyHook>>(m, "EndOnlyHook")
      .def(py::init([](py::function end) { return std::make_shared<EndOnlyHook>(python_action(end)); }),
           py::kw_only(), py::arg("end"));
  py::class_<FeedFnHook, Hook, std::shared_ptr<FeedFnHook>>(m, "FeedFnHook")
      .def(py::init(&make_feed_fn_hook), py::kw_only(), py::arg("feeds"));
  py::class_<GlobalStepWaiterHook, Hook, std::shared_ptr<GlobalStepWaiterHook>>(
      m, "GlobalStepWaiterHook")
      .def(py::init(&make_global_step_waiter_hook), py::kw_only(), py::arg("wait"));
}

}  // namespace fastmts
