#include "binding/python_hook.h"

#include <pybind11/stl.h>

#include "binding/python_conversion.h"

namespace py = pybind11;

namespace fastmts {
namespace {

py::handle step_state(const StepContext& ctx) { return *static_cast<py::object*>(ctx.user_data()); }

// All hooks of a step share one run context in TF: a stop requested by a
// native hook is seen by the Python hooks after it.
void share_stop_request(const StepContext& ctx, py::handle state) {
  if (ctx.stop_requested()) state.attr("run_context").attr("request_stop")();
}

}  // namespace

PythonHook::PythonHook(py::object hook, py::object runner)
    : before_run_(hook.attr("before_run")),
      after_run_(hook.attr("after_run")),
      runner_(std::move(runner)),
      resolve_(runner_.attr("resolve")),
      build_(runner_.attr("build")),
      args_type_(runner_.attr("args_type")),
      values_type_(runner_.attr("values_type")),
      new_tuple_(py::module_::import("builtins").attr("tuple").attr("__new__")),
      flat_(runner_.attr("leaf_types"), runner_.attr("fast_layout")) {}

void PythonHook::after_create_session(const SessionRunner&) { runner_.attr("after_create_session")(); }

void PythonHook::before_run(StepContext& ctx, RunRequest& request) {
  py::handle state = step_state(ctx);
  share_stop_request(ctx, state);
  py::object wish = before_run_(state.attr("run_context"));
  if (wish.is_none()) return;
  if (Py_TYPE(wish.ptr()) == reinterpret_cast<PyTypeObject*>(args_type_.ptr())) {
    py::tuple args = py::reinterpret_borrow<py::tuple>(wish);  // (fetches, feed_dict, options)
    if (args.size() == 3 && !args[0].is_none() && args[1].is_none() && args[2].is_none()) {
      if (FlatFetchPlanPtr flat = flat_.find(args[0])) {
        request.plan = flat->request.plan;
        request.hook_state = flat;  // after_run builds the results from it
        return;
      }
    }
  }
  py::tuple t = resolve_(state, wish);
  request = request_from_python(t[0], t[1], t[2], t[3]);
}

void PythonHook::after_run(StepContext& ctx, const RunRequest& request, const Fetched* outputs,
                           const std::string& run_metadata) {
  py::handle state = step_state(ctx);
  share_stop_request(ctx, state);
  if (ctx.full_trace()) runner_.attr("take_full_trace")(state);  // TF's merged options
  if (!run_metadata.empty() || state.attr("metadata_requested").cast<bool>())
    runner_.attr("take_metadata")(state, py::bytes(run_metadata));
  py::object results = py::none();
  if (outputs) {
    auto flat = std::static_pointer_cast<const FlatFetchPlan>(request.hook_state);
    const std::vector<SharedTensor> values = outputs->to_vector();
    results = flat ? PythonFlatFetches::build(*flat, values) : build_(state, outputs_to_python(values));
  }
  // SessionRunValues is a namedtuple: tuple.__new__ makes one without
  // running its Python __new__.
  py::object values = new_tuple_(
      values_type_, py::make_tuple(results, state.attr("options"), state.attr("run_metadata")));
  after_run_(state.attr("run_context"), values);
}

void PythonHook::end(const SessionRunner&) { runner_.attr("end")(); }

void take_python_stop_request(HookedSession& session, py::handle step_state) {
  if (!step_state.is_none() && step_state.attr("run_context").attr("stop_requested").cast<bool>())
    session.request_stop();
}

}  // namespace fastmts
