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

std::shared_ptr<StopAtStepHook> make_stop_at_step_hook(py::object c_op, int index,
                                                       int64_t num_steps,
                                                       std::optional<int64_t> last_step,
                                                       py::function on_last_step) {
  return std::make_shared<StopAtStepHook>(
      output_of(c_op, index), num_steps, last_step,
      holding_gil([on_last_step](int64_t step) { on_last_step(step); }));
}

std::shared_ptr<NanTensorHook> make_nan_tensor_hook(py::object c_op, int index,
                                                    bool fail_on_nan_loss, py::function on_nan) {
  return std::make_shared<NanTensorHook>(output_of(c_op, index), fail_on_nan_loss,
                                         python_action(on_nan));
}

std::shared_ptr<LoggingTensorHook> make_logging_tensor_hook(
    const std::shared_ptr<RunPlan>& tensors, std::optional<double> every_secs,
    std::optional<double> every_steps, bool never, py::function log, py::function on_end) {
  return std::make_shared<LoggingTensorHook>(
      tensors, SecondOrStepTimer(every_secs, every_steps, never),
      holding_gil([log](int64_t iter, const std::vector<SharedTensor>& values) {
        log(iter, outputs_to_python(values));
      }),
      python_action(on_end));
}

// `act(stale_step) -> bool` is the hook's action (TF's _save,
// _log_and_record...); `on_trigger(fresh_step) -> bool` decides on the
// re-read step; `record(rates, timer_last_step, timer_last_time)` gets
// StepCounterHook's batched step rates; `writer` (may be null) is the
// asynchronous checkpoint writer whose ended write `on_written()` delivers.
std::shared_ptr<GlobalStepGatedHook> make_global_step_gated_hook(
    py::object c_op, int index, std::optional<double> every_secs,
    std::optional<double> every_steps, int64_t steps_per_run, bool track_stuck_step,
    std::optional<int64_t> last_step, py::function act, py::object on_trigger, py::object record,
    py::function after_create_session, py::function end, std::shared_ptr<CheckpointWriter> writer,
    py::object on_written) {
  GlobalStepGatedHook::TriggerFn trigger;
  if (!on_trigger.is_none())
    trigger = holding_gil([on_trigger](int64_t fresh) { return on_trigger(fresh).cast<bool>(); });
  GlobalStepGatedHook::RecordFn record_rates;
  if (!record.is_none())
    record_rates = holding_gil([record](const std::vector<GlobalStepGatedHook::StepRate>& rates,
                                        std::optional<int64_t> timer_last_step,
                                        double timer_last_time) {
      py::list py_rates;
      for (const auto& r : rates)
        py_rates.append(py::make_tuple(r.elapsed_steps, r.elapsed_secs, r.global_step, r.triggered_at));
      record(py_rates, optional_step(timer_last_step), timer_last_time);
    });
  GlobalStepGatedHook::PollFn poll;
  if (writer) poll = [writer] { return writer->has_outcome(); };  // an atomic read, no GIL
  GlobalStepGatedHook::ReportFn report;
  if (!on_written.is_none())
    report = holding_gil([on_written]() { return on_written().cast<bool>(); });
  return std::make_shared<GlobalStepGatedHook>(
      output_of(c_op, index), SecondOrStepTimer(every_secs, every_steps), steps_per_run,
      track_stuck_step, last_step,
      holding_gil([act](int64_t stale) { return act(stale).cast<bool>(); }), std::move(trigger),
      std::move(record_rates), python_action(after_create_session), python_action(end),
      std::move(poll), std::move(report));
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

// A native hook's timer as TF's timer keeps it: (last step or None, time).
template <typename NativeHook>
std::tuple<py::object, double> timer_state_of(const NativeHook& hook) {
  return {optional_step(hook.timer().last_step()), hook.timer().last_time()};
}

// `act(stale_step, next_step, requested, extra, run_metadata) -> next step
// or None`: SummarySaverHook's and ProfilerHook's actions.
std::shared_ptr<StepScheduledHook> make_step_scheduled_hook(
    py::object c_op, int index, std::optional<double> every_secs,
    std::optional<double> every_steps, bool act_on_first_step, bool full_trace, py::function act,
    py::function end) {
  return std::make_shared<StepScheduledHook>(
      output_of(c_op, index), SecondOrStepTimer(every_secs, every_steps), act_on_first_step,
      full_trace,
      holding_gil([act](int64_t stale, std::optional<int64_t> next, bool requested,
                        const std::vector<SharedTensor>* extra, const std::string& metadata) {
        py::object next_step =
            act(stale, optional_step(next), requested,
                extra ? py::object(outputs_to_python(*extra)) : py::object(py::none()),
                metadata.empty() ? py::object(py::none()) : py::object(py::bytes(metadata)));
        return next_step.is_none() ? std::optional<int64_t>()
                                   : std::optional<int64_t>(next_step.cast<int64_t>());
      }),
      python_action(end));
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

}  // namespace

void register_hooks(py::module_& m) {
  py::class_<Hook, HookPtr>(m, "Hook");
  py::class_<PythonHook, Hook, std::shared_ptr<PythonHook>>(m, "PythonHook")
      .def(py::init<py::object, py::object>(), py::arg("hook"), py::arg("runner"));

  py::class_<StopAtStepHook, Hook, std::shared_ptr<StopAtStepHook>>(m, "StopAtStepHook")
      .def(py::init(&make_stop_at_step_hook), py::arg("global_step_op"),
           py::arg("global_step_index"), py::arg("num_steps"), py::arg("last_step"),
           py::arg("on_last_step"));

  py::class_<NanTensorHook, Hook, std::shared_ptr<NanTensorHook>>(m, "NanTensorHook")
      .def(py::init(&make_nan_tensor_hook), py::arg("loss_op"), py::arg("loss_index"),
           py::arg("fail_on_nan_loss"), py::arg("on_nan"));

  py::class_<LoggingTensorHook, Hook, std::shared_ptr<LoggingTensorHook>>(m, "LoggingTensorHook")
      .def(py::init(&make_logging_tensor_hook), py::arg("tensors"), py::arg("every_secs"),
           py::arg("every_steps"), py::arg("never"), py::arg("log"), py::arg("on_end"))
      .def_property_readonly("iter_count", &LoggingTensorHook::iter_count)
      .def_property_readonly("timer_state", &timer_state_of<LoggingTensorHook>)
      .def(
          "set_quiet_unless_logged_by",
          [](LoggingTensorHook& h, py::object logger) { h.set_quiet_unless(info_logged_by(logger)); },
          py::arg("logger"))
      .def("adopt_timer", &LoggingTensorHook::adopt_timer, py::arg("last_step"),
           py::arg("last_time"));

  py::class_<GlobalStepGatedHook, Hook, std::shared_ptr<GlobalStepGatedHook>>(
      m, "GlobalStepGatedHook")
      .def(py::init(&make_global_step_gated_hook), py::arg("global_step_op"),
           py::arg("global_step_index"), py::arg("every_secs"), py::arg("every_steps"),
           py::arg("steps_per_run"), py::arg("track_stuck_step"), py::arg("last_step"),
           py::arg("act"), py::arg("on_trigger"), py::arg("record"),
           py::arg("after_create_session"), py::arg("end"), py::arg("writer") = nullptr,
           py::arg("on_written") = py::none())
      .def_property_readonly("last_step",
                             [](const GlobalStepGatedHook& h) { return optional_step(h.last_step()); })
      .def_property_readonly("timer_state", &timer_state_of<GlobalStepGatedHook>)
      .def(
          "set_summary_writer",
          [](GlobalStepGatedHook& h, std::shared_ptr<SummaryWriter> writer, std::string tag,
             py::object logger) {
            h.set_summary_writer(std::move(writer), std::move(tag), info_logged_by(logger));
          },
          py::arg("writer"), py::arg("tag"), py::arg("logger"))
      .def("adopt_timer", &GlobalStepGatedHook::adopt_timer, py::arg("last_step"),
           py::arg("last_time"));

  py::class_<StepScheduledHook, Hook, std::shared_ptr<StepScheduledHook>>(m, "StepScheduledHook")
      .def(py::init(&make_step_scheduled_hook), py::arg("global_step_op"),
           py::arg("global_step_index"), py::arg("every_secs"), py::arg("every_steps"),
           py::arg("act_on_first_step"), py::arg("full_trace"), py::arg("act"), py::arg("end"))
      .def("set_extra", &StepScheduledHook::set_extra, py::arg("plan"))
      .def("set_summary_writer", &StepScheduledHook::set_summary_writer, py::arg("writer"))
      .def_property_readonly("next_step", &StepScheduledHook::next_step)
      .def_property_readonly("timer_state", &timer_state_of<StepScheduledHook>)
      .def("adopt_timer", &StepScheduledHook::adopt_timer, py::arg("last_step"),
           py::arg("last_time"));

  py::class_<EndOnlyHook, Hook, std::shared_ptr<EndOnlyHook>>(m, "EndOnlyHook")
      .def(py::init([](py::function end) { return std::make_shared<EndOnlyHook>(python_action(end)); }),
           py::arg("end"));
  py::class_<FeedFnHook, Hook, std::shared_ptr<FeedFnHook>>(m, "FeedFnHook")
      .def(py::init(&make_feed_fn_hook), py::arg("feeds"));
  py::class_<GlobalStepWaiterHook, Hook, std::shared_ptr<GlobalStepWaiterHook>>(
      m, "GlobalStepWaiterHook")
      .def(py::init(&make_global_step_waiter_hook), py::arg("wait"));
}

}  // namespace fastmts
