// pybind11 bindings of fastmts's native core: glue only. Converts between
// Python objects and the core's types, takes the GIL for Python calls and
// releases it around everything that reaches TensorFlow.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <string>
#include <unordered_map>
#include <vector>

#include "callback_hooks.h"
#include "coordinator.h"
#include "hooked_session.h"
#include "native_hooks.h"
#include "python_time.h"
#include "queue_runner.h"
#include "run_plan.h"
#include "signal_watch.h"
#include "tensor_convert.h"
#include "text_format_binding.h"
#include "checkpoint_writer_binding.h"
#include "checkpoint_writer.h"
#include "native_threads.h"
#include "tf_status.h"
#include "tf_python_handles.h"
#include "timers.h"

namespace py = pybind11;
using namespace fastmts;

namespace {

// ---- numpy <-> TF_Tensor ---------------------------------------------------

// TF dtype enum -> numpy dtype, filled from Python (tf.dtypes knows them all,
// bfloat16 and the quantized types included).
std::unordered_map<int, py::object>& numpy_dtypes() {
  static auto* table = new std::unordered_map<int, py::object>();
  return *table;
}

py::object strings_to_python(const TF_Tensor* t) {
  std::vector<std::string_view> items = string_elements(t);
  if (tf::NumDims(t) == 0) return py::bytes(items.at(0).data(), items.at(0).size());
  py::list flat(items.size());
  for (size_t i = 0; i < items.size(); ++i)
    flat[i] = py::bytes(items[i].data(), items[i].size());
  py::module_ np = py::module_::import("numpy");
  return np.attr("array")(flat, py::arg("dtype") = "O").attr("reshape")(py::cast(tensor_dims(t)));
}

// Zero-copy: the array keeps the (exclusively owned) TF tensor alive. 0-d
// results become numpy scalars, as TF's Session.run returns them.
py::object to_python(const SharedTensor& t) {
  TF_DataType dt = tf::TensorType(t.get());
  if (dt == TF_STRING) return strings_to_python(t.get());
  auto it = numpy_dtypes().find(static_cast<int>(dt));
  if (it == numpy_dtypes().end())
    throw py::type_error("cannot fetch a tensor of TF dtype " + std::to_string(dt));
  std::vector<int64_t> dims = tensor_dims(t.get());
  auto* keep = new SharedTensor(t);
  py::capsule base(keep, [](void* p) { delete static_cast<SharedTensor*>(p); });
  py::array arr(py::dtype::from_args(it->second), std::vector<py::ssize_t>(dims.begin(), dims.end()),
                tf::TensorData(t.get()), base);
  if (dims.empty()) return arr[py::tuple()];
  return std::move(arr);
}

py::list outputs_to_python(const std::vector<SharedTensor>& outputs) {
  py::list out(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) out[i] = to_python(outputs[i]);
  return out;
}

TensorPtr string_feed(const py::array& arr) {
  std::vector<int64_t> dims(arr.shape(), arr.shape() + arr.ndim());
  py::list flat = arr.attr("ravel")().attr("tolist")();
  std::vector<std::string> storage;
  storage.reserve(flat.size());
  for (py::handle item : flat) {
    if (PyBytes_Check(item.ptr())) {
      storage.emplace_back(item.cast<std::string>());
    } else if (PyUnicode_Check(item.ptr())) {
      storage.emplace_back(py::str(item).cast<std::string>());  // UTF-8, as TF encodes
    } else {
      // TF's own conversion fails here with an INTERNAL status, not a TypeError.
      throw TFError(TF_INTERNAL, std::string("Unsupported object type ") + Py_TYPE(item.ptr())->tp_name);
    }
  }
  std::vector<std::string_view> views(storage.begin(), storage.end());
  return tensor_from_strings(dims, views);
}

// Values were already converted by Python to the feed's numpy dtype.
std::vector<TensorPtr> feeds_from_python(const FeedPlan& plan, py::handle values) {
  py::sequence seq = py::reinterpret_borrow<py::sequence>(values);
  if (seq.size() != plan.keys.size())
    throw py::value_error("feed values do not match the feed plan");
  std::vector<TensorPtr> out;
  out.reserve(plan.keys.size());
  for (size_t i = 0; i < plan.keys.size(); ++i) {
    if (plan.dtypes[i] == TF_STRING) {
      out.push_back(string_feed(py::array::ensure(seq[i])));
      continue;
    }
    py::array arr = py::array::ensure(seq[i], py::array::c_style);
    if (!arr) throw py::error_already_set();
    const size_t item = tf::DataTypeSize(plan.dtypes[i]);
    if (item && static_cast<size_t>(arr.itemsize()) != item)
      throw py::type_error("feed value has the wrong item size for its tensor");
    std::vector<int64_t> dims(arr.shape(), arr.shape() + arr.ndim());
    out.push_back(tensor_from_buffer(plan.dtypes[i], dims, arr.data(), arr.nbytes()));
  }
  return out;
}

RunRequest request_from_python(py::handle plan, py::handle feed_plan, py::handle feed_values,
                               py::handle run_options) {
  RunRequest r;
  if (!plan.is_none()) r.plan = plan.cast<std::shared_ptr<RunPlan>>();
  if (!feed_plan.is_none()) {
    r.feed_plan = feed_plan.cast<std::shared_ptr<FeedPlan>>();
    r.feed_values = feeds_from_python(*r.feed_plan, feed_values);
  }
  if (!run_options.is_none()) r.run_options = run_options.cast<std::string>();
  return r;
}

// ---- Flat fetch structures -------------------------------------------------

// Fetch structures whose results are each leaf's value (None for an
// operation): a Tensor, Operation or Variable alone, or a flat list, tuple
// or dict of them -- what training loops and hooks fetch. Their plans are
// found by the leaves' (and dict keys') identity, without Python, and their
// results built here. `describe(fetches)` (Python, once per structure) gives
// (RunPlan, layout) with layout[i] leaf i's index among the plan's fetches
// (-1: an operation), or None when TF must build the results itself.
class FlatPlans {
 public:
  enum Kind { kLeaf, kList, kTuple, kDict };
  struct Entry {
    bool fast;  // false: seen, and not a flat structure for this path
    Kind kind;
    std::vector<py::object> leaves, keys;  // held, so their ids stay theirs
    std::vector<int> layout;
    RunRequest request;
  };
  using EntryPtr = std::shared_ptr<const Entry>;

  FlatPlans(py::tuple leaf_types, py::object describe)
      : leaf_types_(std::move(leaf_types)), describe_(std::move(describe)) {}

  // The entry of a flat structure, or null (not flat, or TF builds it).
  EntryPtr find(py::handle fetches) {
    Shape shape;
    if (!read(fetches, &shape)) return nullptr;
    for (const EntryPtr& e : entries_)
      if (matches(*e, shape)) return e->fast ? e : nullptr;
    EntryPtr e = add(fetches, shape);
    return e && e->fast ? e : nullptr;
  }

  static py::object build(const Entry& e, const std::vector<SharedTensor>& outputs) {
    auto value = [&](size_t i) -> py::object {
      return e.layout[i] < 0 ? py::object(py::none()) : to_python(outputs.at(e.layout[i]));
    };
    const size_t n = e.layout.size();
    switch (e.kind) {
      case kLeaf: return value(0);
      case kList: {
        py::list out(n);
        for (size_t i = 0; i < n; ++i) out[i] = value(i);
        return std::move(out);
      }
      case kTuple: {
        py::tuple out(n);
        for (size_t i = 0; i < n; ++i) out[i] = value(i);
        return std::move(out);
      }
      case kDict: {
        py::dict out;
        for (size_t i = 0; i < n; ++i) out[e.keys[i]] = value(i);
        return std::move(out);
      }
    }
    throw std::logic_error("fastmts: bad fetch kind");
  }

 private:
  struct Shape {  // borrowed references, valid during one call
    Kind kind;
    std::vector<PyObject*> leaves, keys;
  };
  static constexpr size_t kMaxEntries = 32;

  bool read(py::handle fetches, Shape* shape) {
    PyObject* f = fetches.ptr();
    if (PyList_CheckExact(f)) {
      shape->kind = kList;
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(f); ++i) shape->leaves.push_back(PyList_GET_ITEM(f, i));
    } else if (PyTuple_CheckExact(f)) {
      shape->kind = kTuple;
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(f); ++i) shape->leaves.push_back(PyTuple_GET_ITEM(f, i));
    } else if (PyDict_CheckExact(f)) {
      shape->kind = kDict;
      PyObject *key, *value;
      Py_ssize_t pos = 0;
      while (PyDict_Next(f, &pos, &key, &value)) {
        shape->keys.push_back(key);
        shape->leaves.push_back(value);
      }
    } else {
      shape->kind = kLeaf;
      shape->leaves.push_back(f);
    }
    for (PyObject* leaf : shape->leaves)
      if (!is_leaf_type(Py_TYPE(leaf))) return false;
    return true;
  }

  static bool matches(const Entry& e, const Shape& shape) {
    if (e.kind != shape.kind || e.leaves.size() != shape.leaves.size()) return false;
    for (size_t i = 0; i < shape.leaves.size(); ++i)
      if (e.leaves[i].ptr() != shape.leaves[i]) return false;
    for (size_t i = 0; i < shape.keys.size(); ++i)
      if (e.keys[i].ptr() != shape.keys[i]) return false;
    return true;
  }

  // isinstance(leaf, leaf_types), remembered per exact type: TF's leaf
  // classes are ABCs, whose isinstance check runs Python.
  bool is_leaf_type(PyTypeObject* type) {
    for (const auto& [known, is_leaf] : leaf_type_cache_)
      if (known.ptr() == reinterpret_cast<PyObject*>(type)) return is_leaf;
    const int is_leaf = PyObject_IsSubclass(reinterpret_cast<PyObject*>(type), leaf_types_.ptr());
    if (is_leaf < 0) throw py::error_already_set();
    leaf_type_cache_.emplace_back(
        py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(type)), is_leaf != 0);
    return is_leaf != 0;
  }

  // A structure that cannot be resolved (TF raises) is not cached: the
  // caller's slow path raises TF's error.
  EntryPtr add(py::handle fetches, const Shape& shape) {
    py::object d;
    try {
      d = describe_(fetches);
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_Exception)) throw;
      return nullptr;
    }
    auto e = std::make_shared<Entry>();
    e->kind = shape.kind;
    for (PyObject* leaf : shape.leaves) e->leaves.push_back(py::reinterpret_borrow<py::object>(leaf));
    for (PyObject* key : shape.keys) e->keys.push_back(py::reinterpret_borrow<py::object>(key));
    e->fast = !d.is_none();
    if (e->fast) {
      py::tuple t = d;
      e->request.plan = t[0].cast<std::shared_ptr<RunPlan>>();
      e->layout = t[1].cast<std::vector<int>>();
      if (e->layout.size() != shape.leaves.size())
        throw std::logic_error("fastmts: bad fetch layout");
    }
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_.push_back(e);
    return e;
  }

  py::tuple leaf_types_;  // what a fetched leaf may be (Tensor, Operation, Variable)
  py::object describe_;
  std::vector<std::pair<py::object, bool>> leaf_type_cache_;
  std::vector<EntryPtr> entries_;
};

// ---- Python hooks ----------------------------------------------------------

// The session whose native loop runs on this thread without the GIL, if
// any: its hooks may postpone Python work (LoopControl::may_defer).
thread_local HookedSession* t_loop_session = nullptr;

// Native hooks call Python (TF's own hook code) only on the steps where they
// act. The native loop may run without the GIL, so each such call takes it
// (cheaply when the caller already holds it), and first lets the loop's
// hooks hand over the Python work they postponed, which came earlier in TF's
// order.
template <typename Fn>
auto holding_gil(Fn fn) {
  return [fn = std::move(fn)](auto&&... args) {
    py::gil_scoped_acquire gil;
    if (t_loop_session) t_loop_session->flush_deferred();
    return fn(std::forward<decltype(args)>(args)...);
  };
}

// The GIL is held while the core runs hooks and given up around TF calls.
class GilRelease : public BlockingCallGuard {
 public:
  void* release() const override { return PyEval_SaveThread(); }
  void reacquire(void* token) const override {
    PyEval_RestoreThread(static_cast<PyThreadState*>(token));
  }
};
const GilRelease kGilRelease;

// A Python SessionRunHook in the native dispatch. The hook's own
// before_run/after_run are called directly; `runner`
// (fastmts.hooked_session._PythonHookRunner) resolves what it asks for into
// plans and rebuilds its results. Per-step objects live in the step state
// (run_context, options, run_metadata) that the caller of run passes. The
// common wish -- a SessionRunArgs of a flat structure of tensors, no feeds
// or options -- is resolved and its results built natively (FlatPlans).
class PyHook : public Hook {
 public:
  PyHook(py::object hook, py::object runner)
      : before_run_(hook.attr("before_run")),
        after_run_(hook.attr("after_run")),
        runner_(std::move(runner)),
        resolve_(runner_.attr("resolve")),
        build_(runner_.attr("build")),
        args_type_(runner_.attr("args_type")),
        values_type_(runner_.attr("values_type")),
        new_tuple_(py::module_::import("builtins").attr("tuple").attr("__new__")),
        flat_(runner_.attr("leaf_types"), runner_.attr("fast_layout")) {}

  void after_create_session(const SessionRunner&) override {
    runner_.attr("after_create_session")();
  }

  void before_run(StepContext& ctx, RunRequest& request) override {
    py::handle state = step_state(ctx);
    share_stop_request(ctx, state);
    py::object wish = before_run_(state.attr("run_context"));
    if (wish.is_none()) return;
    if (Py_TYPE(wish.ptr()) == reinterpret_cast<PyTypeObject*>(args_type_.ptr())) {
      py::tuple args = py::reinterpret_borrow<py::tuple>(wish);  // (fetches, feed_dict, options)
      if (args.size() == 3 && !args[0].is_none() && args[1].is_none() && args[2].is_none()) {
        if (FlatPlans::EntryPtr flat = flat_.find(args[0])) {
          request.plan = flat->request.plan;
          request.hook_state = flat;  // after_run builds the results from it
          return;
        }
      }
    }
    py::tuple t = resolve_(state, wish);
    request = request_from_python(t[0], t[1], t[2], t[3]);
  }

  void after_run(StepContext& ctx, const RunRequest& request,
                 const Fetched* outputs,
                 const std::string& run_metadata) override {
    py::handle state = step_state(ctx);
    share_stop_request(ctx, state);
    if (!run_metadata.empty() || state.attr("metadata_requested").cast<bool>())
      runner_.attr("take_metadata")(state, py::bytes(run_metadata));
    py::object results = py::none();
    if (outputs) {
      auto flat = std::static_pointer_cast<const FlatPlans::Entry>(request.hook_state);
      const std::vector<SharedTensor> values = outputs->to_vector();
      results = flat ? FlatPlans::build(*flat, values) : build_(state, outputs_to_python(values));
    }
    // SessionRunValues is a namedtuple: tuple.__new__ makes one without
    // running its Python __new__.
    py::object values = new_tuple_(
        values_type_, py::make_tuple(results, state.attr("options"), state.attr("run_metadata")));
    after_run_(state.attr("run_context"), values);
  }

  void end(const SessionRunner&) override { runner_.attr("end")(); }

 private:
  static py::handle step_state(const StepContext& ctx) {
    return *static_cast<py::object*>(ctx.user_data());
  }
  // All hooks of a step share one run context in TF: a stop requested by a
  // native hook is seen by the Python hooks after it.
  static void share_stop_request(const StepContext& ctx, py::handle state) {
    if (ctx.stop_requested()) state.attr("run_context").attr("request_stop")();
  }
  py::object before_run_, after_run_, runner_, resolve_, build_, args_type_, values_type_,
      new_tuple_;
  FlatPlans flat_;
};

std::shared_ptr<RunPlan> make_plan(const std::vector<std::pair<py::object, int>>& fetches,
                  const std::vector<py::object>& targets) {
  auto plan = std::make_shared<RunPlan>();
  for (const auto& [c_op, index] : fetches) plan->fetches.push_back({operation_pointer(c_op), index});
  for (const auto& c_op : targets) plan->targets.push_back(operation_pointer(c_op));
  return plan;
}

std::shared_ptr<FeedPlan> make_feed_plan(const std::vector<std::pair<py::object, int>>& keys,
                           const std::vector<int>& dtypes, const std::vector<std::string>& labels) {
  if (keys.size() != dtypes.size() || keys.size() != labels.size())
    throw py::value_error("feed plan: keys, dtypes and labels differ in length");
  auto plan = std::make_shared<FeedPlan>();
  for (size_t i = 0; i < keys.size(); ++i) {
    plan->keys.push_back({operation_pointer(keys[i].first), keys[i].second});
    plan->dtypes.push_back(static_cast<TF_DataType>(dtypes[i]));
  }
  plan->labels = labels;
  return plan;
}

// Python hooks share one run context per step: its stop request is read once.
void take_python_stop_request(HookedSession& session, py::handle step_state) {
  if (!step_state.is_none() &&
      step_state.attr("run_context").attr("stop_requested").cast<bool>())
    session.request_stop();
}

py::tuple run_step(HookedSession& session, py::handle plan, py::handle feed_plan,
                   py::handle feed_values, py::handle run_options, bool want_metadata,
                   py::object step_state) {
  if (!session.attached()) throw std::logic_error("fastmts: run on a detached session");
  RunRequest caller = request_from_python(plan, feed_plan, feed_values, run_options);
  // The GIL stays held for the hooks; the core gives it up around TF calls.
  RunResult result = session.run(caller, want_metadata, &step_state);
  take_python_stop_request(session, step_state);
  py::object metadata = result.run_metadata.empty() ? py::object(py::none())
                                                    : py::object(py::bytes(result.run_metadata));
  return py::make_tuple(outputs_to_python(result.outputs), metadata);
}

// Steps in C++ until stop, max_steps or an error. `make_state` (None when
// there are no Python hooks) makes each step's state for the Python hooks.
// A pending signal (Ctrl-C) ends the loop between steps with its exception.
// Returns the last step's outputs, or None when no step ran.
//
// Without Python hooks the loop gives up the GIL for its whole length (the
// native hooks take it on the steps where they call TF's Python code), so
// it cannot ask Python about signals each step: it watches
// `python_signals` (those with a Python handler) and takes the GIL to let
// Python handle them when one arrives, and at least every 100 ms in case a
// handler was replaced meanwhile.
py::object run_loop(HookedSession& session, py::handle plan, py::handle feed_plan,
                    py::handle feed_values, int64_t max_steps, const Coordinator* coordinator,
                    py::object make_state, const std::vector<int>& python_signals) {
  if (!session.attached()) throw std::logic_error("fastmts: run on a detached session");
  RunRequest caller = request_from_python(plan, feed_plan, feed_values, py::none());
  LoopControl control;
  control.max_steps = max_steps;
  control.coordinator = coordinator;
  RunResult last;
  int64_t steps = 0;
  if (make_state.is_none()) {
    using Clock = std::chrono::steady_clock;
    constexpr auto kSignalCheckInterval = std::chrono::milliseconds(100);
    SignalWatch watch(python_signals);
    uint64_t seen = SignalWatch::deliveries();
    Clock::time_point next_check = Clock::now() + kSignalCheckInterval;
    control.lock_held = false;
    control.may_defer = true;
    notice_python_time();  // the clock the timers will read without the GIL
    control.between_steps = [&] {
      const uint64_t now_seen = SignalWatch::deliveries();
      if (now_seen == seen && Clock::now() < next_check) return;
      seen = now_seen;
      next_check = Clock::now() + kSignalCheckInterval;
      py::gil_scoped_acquire gil;
      session.flush_deferred();  // what the handler may see came first
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    };
    struct LoopSession {  // t_loop_session for the loop's length
      HookedSession* previous = t_loop_session;
      explicit LoopSession(HookedSession* s) { t_loop_session = s; }
      ~LoopSession() { t_loop_session = previous; }
    };
    try {
      LoopSession loop_session(&session);
      py::gil_scoped_release nogil;
      steps = session.run_loop(caller, control, &last);
    } catch (...) {
      // Postponed work came before the error in TF's order: hand it over
      // (should that raise, its error is the one TF would have raised).
      session.flush_deferred();
      throw;
    }
    session.flush_deferred();
  } else {
    py::object state = py::none();
    control.begin_step = [&]() -> void* {
      state = make_state();
      return &state;
    };
    control.end_step = [&](void*) { take_python_stop_request(session, state); };
    control.between_steps = [] {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    };
    steps = session.run_loop(caller, control, &last);
  }
  if (steps == 0) return py::none();
  return outputs_to_python(last.outputs);
}

// ---- The common step without Python ---------------------------------------

py::handle status_error_type;  // fastmts._native.StatusError (never freed), set at import

// `MonitoredSession.run(fetches)` with no feeds, options or metadata, where
// `fetches` is a flat structure (FlatPlans): the plan is found by the
// leaves' identity and the step runs and its results are built here, so with
// only native hooks no Python runs (`make_state`, given when there are Python
// hooks, makes their step state). Anything else goes to `slow` (the Python
// path, same arguments), and every failure to `failed(error, fetches)`,
// which raises or retries as the session's wrappers do.
class FastRun {
 public:
  FastRun(py::object hooked, py::tuple leaf_types, py::object describe, py::object make_state,
          py::object slow, py::object failed)
      : hooked_owner_(std::move(hooked)),
        session_(hooked_owner_.cast<HookedSession*>()),
        plans_(std::move(leaf_types), std::move(describe)),
        make_state_(std::move(make_state)),
        slow_(std::move(slow)),
        failed_(std::move(failed)) {}

  py::object call(py::handle fetches, py::handle feed_dict, py::handle options,
                  py::handle run_metadata) {
    if (!feed_dict.is_none() || !options.is_none() || !run_metadata.is_none() ||
        !session_->attached())
      return slow_(fetches, feed_dict, options, run_metadata);
    FlatPlans::EntryPtr entry = plans_.find(fetches);
    if (!entry) return slow_(fetches, feed_dict, options, run_metadata);
    py::object state = make_state_.is_none() ? py::object(py::none()) : make_state_(fetches);
    RunResult result;
    try {
      result = session_->run(entry->request, false, &state);
      take_python_stop_request(*session_, state);
    } catch (py::error_already_set& e) {
      if (!e.matches(PyExc_Exception)) throw;  // KeyboardInterrupt and the like
      return failed_(e.value(), fetches);
    } catch (const TFError& e) {
      return failed_(status_error_type(e.code(), py::str(e.what())), fetches);
    } catch (const std::runtime_error& e) {  // feed conflicts, run after stop
      return failed_(py::reinterpret_steal<py::object>(
                         PyObject_CallFunction(PyExc_RuntimeError, "s", e.what())),
                     fetches);
    }
    return FlatPlans::build(*entry, result.outputs);
  }

 private:
  py::object hooked_owner_;  // keeps session_ alive
  HookedSession* session_;
  FlatPlans plans_;
  py::object make_state_, slow_, failed_;
};

// ---- run() without pybind11's dispatcher -----------------------------------

// Inside a catch block: sets the Python error for the exception in flight
// exactly as pybind11 would (this module's translators included), by
// rethrowing it inside a pybind11 function. Only failures pay for this.
void set_python_error_from_current() {
  static const py::handle rethrow = py::cpp_function([](py::capsule held) {
    std::rethrow_exception(*held.get_pointer<std::exception_ptr>());
  }).release();  // leaked on purpose, as the module's exception type
  try {
    py::capsule held(new std::exception_ptr(std::current_exception()),
                     [](void* p) { delete static_cast<std::exception_ptr*>(p); });
    Py_XDECREF(PyObject_CallOneArg(rethrow.ptr(), held.ptr()));  // raises, returns null
  } catch (...) {
    PyErr_SetString(PyExc_MemoryError, "fastmts: could not convert a C++ exception");
  }
}

// run(fetches, feed_dict=None, options=None, run_metadata=None) as a
// builtin function bound to a FastRun, called through vectorcall: pybind11's
// dispatcher costs ~150 ns a call (measured), a tenth of fastmts's whole
// per-step cost over the floor on a trivial step. Any call that does not
// give run's own arguments by position or name goes unchanged to
// `fallback` (the Python run), so argument errors are Python's own.
struct FastRunEntry {
  py::object owner;  // the FastRun, kept alive
  FastRun* run;
  py::object fallback;
};
constexpr const char* kFastRunEntryName = "fastmts.FastRunEntry";

PyObject* fast_run_entry_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                              PyObject* kwnames) {
  auto* entry = static_cast<FastRunEntry*>(PyCapsule_GetPointer(self, kFastRunEntryName));
  if (!entry) return nullptr;
  static const char* const kNames[] = {"fetches", "feed_dict", "options", "run_metadata"};
  PyObject* given[4] = {nullptr, nullptr, nullptr, nullptr};
  bool plain = nargs <= 4;
  for (Py_ssize_t i = 0; plain && i < nargs; ++i) given[i] = args[i];
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; plain && k < nkw; ++k) {
    int slot = -1;
    for (int j = 0; j < 4 && slot < 0; ++j)
      if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, k), kNames[j]) == 0) slot = j;
    plain = slot >= 0 && !given[slot];
    if (plain) given[slot] = args[nargs + k];
  }
  if (!plain || !given[0])
    return PyObject_Vectorcall(entry->fallback.ptr(), args, static_cast<size_t>(nargs), kwnames);
  try {
    auto arg = [&](int i) { return given[i] ? py::handle(given[i]) : py::handle(Py_None); };
    return entry->run->call(arg(0), arg(1), arg(2), arg(3)).release().ptr();
  } catch (...) {
    set_python_error_from_current();
    return nullptr;
  }
}

PyMethodDef fast_run_entry_def = {
    "run", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_run_entry_call)),
    METH_FASTCALL | METH_KEYWORDS,
    "run(fetches, feed_dict=None, options=None, run_metadata=None)\n--\n\n"
    "Runs one step with hooks; same arguments and results as `tf.Session.run`."};

py::object make_fast_run_entry(py::object fast_run, py::object fallback) {
  auto* entry = new FastRunEntry{fast_run, fast_run.cast<FastRun*>(), std::move(fallback)};
  PyObject* capsule = PyCapsule_New(entry, kFastRunEntryName, [](PyObject* cap) {
    delete static_cast<FastRunEntry*>(PyCapsule_GetPointer(cap, kFastRunEntryName));
  });
  if (!capsule) {
    delete entry;
    throw py::error_already_set();
  }
  py::object owner = py::reinterpret_steal<py::object>(capsule);
  PyObject* function = PyCFunction_New(&fast_run_entry_def, owner.ptr());
  if (!function) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(function);
}

py::object optional_step(std::optional<int64_t> step) {
  return step ? py::object(py::int_(*step)) : py::object(py::none());
}

// The speed floor for benchmarks: `steps` bare TF_SessionRun calls in C++.
// With `reread`, also the hooks' own re-reads of the global step: after
// step i, when i % reread_period is in `reread_at`, one run of `reread` in
// the calling thread, as native hooks make it.

double floor_loop(py::handle tf_session, const std::shared_ptr<RunPlan>& plan, int64_t steps,
                  const std::shared_ptr<RunPlan>& reread, int64_t reread_period,
                  const std::vector<int64_t>& reread_at) {
  if (reread && reread_period <= 0) throw py::value_error("reread_period must be > 0");
  SessionRunner runner(session_pointer(tf_session));
  static const std::vector<TF_Output> kNoInputs;
  static const std::vector<TF_Tensor*> kNoValues;
  static const std::string kNoOptions;
  const std::vector<char> keep_none(plan->fetches.size(), 0);  // outputs are only dropped
  std::vector<char> reread_step(reread ? reread_period : 0, 0);
  if (reread)
    for (int64_t at : reread_at) reread_step.at(at) = 1;
  RunRequest read;
  read.plan = reread;
  read.run_options = kRunInCallerThread;
  RunResult result;
  py::gil_scoped_release nogil;
  auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    runner.run(kNoInputs, kNoValues, plan->fetches, plan->targets, kNoOptions, false, &result,
               &keep_none);
    if (reread && reread_step[i % reread_period]) runner.run(read);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "fastmts native core";
  register_text_format(m);
  register_checkpoint_writer(m);
  bind_imported_tensorflow();
  follow_python_time();
  m.def("operation_name", [](py::handle c_op) {
    return std::string(tf::OperationName(operation_pointer(c_op)));
  }, "The name TF's C API gives the operation behind an Operation's _c_op.");

  // Leaked on purpose: it must outlive the interpreter's module teardown.
  static auto* status_error = new py::exception<TFError>(m, "StatusError");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const TFError& e) {
      py::object args = py::make_tuple(e.code(), py::str(e.what()));
      PyErr_SetObject(status_error->ptr(), args.ptr());
    } catch (const FeedConflictError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const StoppedError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  status_error_type = *status_error;

  m.def("register_numpy_dtype", [](int tf_enum, py::object np_dtype) {
    numpy_dtypes()[tf_enum] = std::move(np_dtype);
  });

  py::class_<RunPlan, std::shared_ptr<RunPlan>>(m, "RunPlan")
      .def(py::init(&make_plan), py::arg("fetches"), py::arg("targets"))
      .def_property_readonly("num_fetches", [](const RunPlan& p) { return p.fetches.size(); })
      .def_property_readonly("num_targets", [](const RunPlan& p) { return p.targets.size(); });

  py::class_<FeedPlan, std::shared_ptr<FeedPlan>>(m, "FeedPlan")
      .def(py::init(&make_feed_plan), py::arg("keys"), py::arg("dtypes"), py::arg("labels"));

  py::class_<Hook, HookPtr>(m, "Hook");
  py::class_<PyHook, Hook, std::shared_ptr<PyHook>>(m, "PythonHook")
      .def(py::init<py::object, py::object>(), py::arg("hook"), py::arg("runner"));
  py::class_<StopAtStepHook, Hook, std::shared_ptr<StopAtStepHook>>(m, "StopAtStepHook")
      .def(py::init([](py::object c_op, int index, int64_t num_steps,
                       std::optional<int64_t> last_step, py::function on_last_step) {
             return std::make_shared<StopAtStepHook>(
                 TF_Output{operation_pointer(c_op), index}, num_steps, last_step,
                 holding_gil([on_last_step](int64_t step) { on_last_step(step); }));
           }),
           py::arg("global_step_op"), py::arg("global_step_index"), py::arg("num_steps"),
           py::arg("last_step"), py::arg("on_last_step"));
  // Callbacks are Python callables (TF's own hook code), each called with
  // the GIL taken (see holding_gil).
  py::class_<NanTensorHook, Hook, std::shared_ptr<NanTensorHook>>(m, "NanTensorHook")
      .def(py::init([](py::object c_op, int index, bool fail_on_nan_loss, py::function on_nan) {
             return std::make_shared<NanTensorHook>(TF_Output{operation_pointer(c_op), index},
                                                    fail_on_nan_loss,
                                                    holding_gil([on_nan]() { on_nan(); }));
           }),
           py::arg("loss_op"), py::arg("loss_index"), py::arg("fail_on_nan_loss"),
           py::arg("on_nan"));
  py::class_<LoggingTensorHook, Hook, std::shared_ptr<LoggingTensorHook>>(m, "LoggingTensorHook")
      .def(py::init([](const std::shared_ptr<RunPlan>& tensors,
                       std::optional<double> every_secs, std::optional<double> every_steps,
                       bool never, py::function log, py::function on_end) {
             return std::make_shared<LoggingTensorHook>(
                 tensors, SecondOrStepTimer(every_secs, every_steps, never),
                 holding_gil([log](int64_t iter, const std::vector<SharedTensor>& values) {
                   log(iter, outputs_to_python(values));
                 }),
                 holding_gil([on_end]() { on_end(); }));
           }),
           py::arg("tensors"), py::arg("every_secs"), py::arg("every_steps"), py::arg("never"),
           py::arg("log"), py::arg("on_end"))
      .def_property_readonly("iter_count", &LoggingTensorHook::iter_count)
      .def("adopt_timer", &LoggingTensorHook::adopt_timer, py::arg("last_step"),
           py::arg("last_time"));
  py::class_<GlobalStepGatedHook, Hook, std::shared_ptr<GlobalStepGatedHook>>(
      m, "GlobalStepGatedHook")
      .def(py::init([](py::object c_op, int index, std::optional<double> every_secs,
                       std::optional<double> every_steps,
                       int64_t steps_per_run, bool track_stuck_step, py::object last_step,
                       py::function act, py::object on_trigger, py::object record,
                       py::function after_create_session, py::function end,
                       std::shared_ptr<CheckpointWriter> writer, py::object on_written) {
             std::optional<int64_t> last;
             if (!last_step.is_none()) last = last_step.cast<int64_t>();
             auto lifecycle = [](py::function fn) { return holding_gil([fn]() { fn(); }); };
             return std::make_shared<GlobalStepGatedHook>(
                 TF_Output{operation_pointer(c_op), index},
                 SecondOrStepTimer(every_secs, every_steps), steps_per_run, track_stuck_step,
                 last,
                 holding_gil([act](int64_t stale) { return act(stale).cast<bool>(); }),
                 on_trigger.is_none() ? GlobalStepGatedHook::TriggerFn()
                                      : holding_gil([on_trigger](int64_t fresh) {
                                          return on_trigger(fresh).cast<bool>();
                                        }),
                 record.is_none()
                     ? GlobalStepGatedHook::RecordFn()
                     : holding_gil([record](const std::vector<GlobalStepGatedHook::StepRate>& rates,
                                            std::optional<int64_t> timer_last_step,
                                            double timer_last_time) {
                         py::list py_rates;
                         for (const auto& r : rates)
                           py_rates.append(py::make_tuple(r.elapsed_steps, r.elapsed_secs,
                                                          r.global_step, r.triggered_at));
                         record(py_rates, optional_step(timer_last_step), timer_last_time);
                       }),
                 lifecycle(after_create_session), lifecycle(end),
                 writer ? GlobalStepGatedHook::PollFn([writer] { return writer->has_outcome(); })
                        : GlobalStepGatedHook::PollFn(),
                 on_written.is_none() ? GlobalStepGatedHook::ReportFn()
                                      : holding_gil([on_written]() {
                                          return on_written().cast<bool>();
                                        }));
           }),
           py::arg("global_step_op"), py::arg("global_step_index"), py::arg("every_secs"),
           py::arg("every_steps"), py::arg("steps_per_run"), py::arg("track_stuck_step"),
           py::arg("last_step"), py::arg("act"), py::arg("on_trigger"), py::arg("record"),
           py::arg("after_create_session"), py::arg("end"), py::arg("writer") = nullptr,
           py::arg("on_written") = py::none())
      .def_property_readonly("last_step",
                             [](const GlobalStepGatedHook& h) { return optional_step(h.last_step()); })
      .def("adopt_timer", &GlobalStepGatedHook::adopt_timer, py::arg("last_step"),
           py::arg("last_time"));

  py::class_<StepScheduledHook, Hook, std::shared_ptr<StepScheduledHook>>(m, "StepScheduledHook")
      .def(py::init([](py::object c_op, int index, std::optional<double> every_secs,
                       std::optional<double> every_steps, bool act_on_first_step,
                       bool full_trace, py::function act, py::function end) {
             return std::make_shared<StepScheduledHook>(
                 TF_Output{operation_pointer(c_op), index},
                 SecondOrStepTimer(every_secs, every_steps), act_on_first_step, full_trace,
                 holding_gil([act](int64_t stale, std::optional<int64_t> next, bool requested,
                       const std::vector<SharedTensor>* extra, const std::string& metadata) {
                   py::object next_step =
                       act(stale, optional_step(next), requested,
                           extra ? py::object(outputs_to_python(*extra)) : py::object(py::none()),
                           metadata.empty() ? py::object(py::none())
                                            : py::object(py::bytes(metadata)));
                   return next_step.is_none() ? std::optional<int64_t>()
                                              : std::optional<int64_t>(next_step.cast<int64_t>());
                 }),
                 holding_gil([end]() { end(); }));
           }),
           py::arg("global_step_op"), py::arg("global_step_index"), py::arg("every_secs"),
           py::arg("every_steps"), py::arg("act_on_first_step"), py::arg("full_trace"),
           py::arg("act"), py::arg("end"))
      .def("set_extra", &StepScheduledHook::set_extra, py::arg("plan"))
      .def_property_readonly("next_step", &StepScheduledHook::next_step)
      .def_property_readonly("timer_state",
                             [](const StepScheduledHook& h) {
                               return py::make_tuple(optional_step(h.timer().last_step()),
                                                     h.timer().last_time());
                             })
      .def("adopt_timer", &StepScheduledHook::adopt_timer, py::arg("last_step"),
           py::arg("last_time"));
  py::class_<EndOnlyHook, Hook, std::shared_ptr<EndOnlyHook>>(m, "EndOnlyHook")
      .def(py::init([](py::function end) {
             return std::make_shared<EndOnlyHook>(holding_gil([end]() { end(); }));
           }),
           py::arg("end"));
  py::class_<FeedFnHook, Hook, std::shared_ptr<FeedFnHook>>(m, "FeedFnHook")
      .def(py::init([](py::function feeds) {
             // feeds() -> (FeedPlan, converted values)
             return std::make_shared<FeedFnHook>(holding_gil([feeds](RunRequest& request) {
               py::tuple t = feeds();
               request = request_from_python(py::none(), t[0], t[1], py::none());
             }));
           }),
           py::arg("feeds"));
  py::class_<GlobalStepWaiterHook, Hook, std::shared_ptr<GlobalStepWaiterHook>>(
      m, "GlobalStepWaiterHook")
      .def(py::init([](py::function wait) {
             return std::make_shared<GlobalStepWaiterHook>(
                 holding_gil([wait]() { return wait().cast<bool>(); }));
           }),
           py::arg("wait"));

  py::class_<Coordinator, std::shared_ptr<Coordinator>>(m, "Coordinator")
      .def(py::init<>())
      .def("request_stop", &Coordinator::request_stop)
      .def("clear_stop", &Coordinator::clear_stop)
      .def("should_stop", &Coordinator::should_stop)
      .def("wait_for_stop", &Coordinator::wait_for_stop, py::arg("timeout_secs"),
           py::call_guard<py::gil_scoped_release>())
      .def("report_error", &Coordinator::report_error, py::arg("code"), py::arg("message"))
      .def("claim_error", &Coordinator::claim_error)
      .def("native_error",
           [](const Coordinator& c) -> py::object {
             auto e = c.native_error();
             if (!e) return py::none();
             return py::make_tuple(e->code, py::str(e->message));
           })
      .def("set_clean_stop_codes", &Coordinator::set_clean_stop_codes, py::arg("codes"));

  // Native queue-runner threads of one QueueRunner; the TF session object
  // is kept alive by the Python wrapper until they are joined.
  py::class_<QueueRunnerThreads>(m, "QueueRunnerThreads")
      .def(py::init([](py::handle tf_session, const std::string& name,
                       const std::vector<py::object>& enqueue_ops, py::object close_op,
                       py::object cancel_op, std::vector<int> closed_codes,
                       std::shared_ptr<Coordinator> coordinator) {
             QueueRunnerSpec spec;
             spec.name = name;
             for (const auto& op : enqueue_ops) spec.enqueue_ops.push_back(operation_pointer(op));
             if (!close_op.is_none()) spec.close_op = operation_pointer(close_op);
             if (!cancel_op.is_none()) spec.cancel_op = operation_pointer(cancel_op);
             spec.queue_closed_codes = std::move(closed_codes);
             return std::make_unique<QueueRunnerThreads>(session_pointer(tf_session),
                                                         std::move(spec), std::move(coordinator));
           }),
           py::arg("tf_session"), py::arg("name"), py::arg("enqueue_ops"), py::arg("close_op"),
           py::arg("cancel_op"), py::arg("queue_closed_codes"), py::arg("coordinator"))
      .def("__len__", &QueueRunnerThreads::size)
      .def("name", &QueueRunnerThreads::name, py::arg("index"))
      .def("alive", &QueueRunnerThreads::alive, py::arg("index"))
      .def("join", &QueueRunnerThreads::join, py::call_guard<py::gil_scoped_release>());
  m.def("live_native_threads", &live_native_threads);

  py::class_<HookedSession>(m, "HookedSession")
      .def(py::init<std::vector<HookPtr>>(), py::arg("hooks"))
      .def("attach",
           [](HookedSession& s, py::handle tf_session) {
             s.attach(session_pointer(tf_session), &kGilRelease);
           })
      .def("detach", &HookedSession::detach)
      .def("end", &HookedSession::end)
      .def_property_readonly("stop_requested", &HookedSession::stop_requested)
      .def("run", &run_step, py::arg("plan"), py::arg("feed_plan"), py::arg("feed_values"),
           py::arg("run_options"), py::arg("want_metadata"), py::arg("step_state"))
      .def("run_loop", &run_loop, py::arg("plan"), py::arg("feed_plan"),
           py::arg("feed_values"), py::arg("max_steps"), py::arg("coordinator"),
           py::arg("make_state"), py::arg("python_signals"))
      .def_property_readonly("steps_run", &HookedSession::steps_run)
      // A plain run on the attached session, no hooks (for TF's own hook code).
      .def("run_plain",
           [](const HookedSession& s, const std::shared_ptr<RunPlan>& plan) {
             if (!s.attached()) throw std::logic_error("fastmts: run on a detached session");
             RunRequest request;
             request.plan = plan;
             return outputs_to_python(s.runner().run(request).outputs);
           },
           py::arg("plan"))
      .def("track_costs", &HookedSession::track_costs, py::arg("on"))
      .def("costs", [](const HookedSession& s) -> py::object {
        const HookCosts* c = s.costs();
        if (!c) return py::none();
        return py::make_tuple(c->steps, c->run_seconds, c->before_run_seconds,
                              c->after_run_seconds);
      });

  py::class_<FastRun>(m, "FastRun")
      .def(py::init<py::object, py::tuple, py::object, py::object, py::object, py::object>(),
           py::arg("hooked"), py::arg("leaf_types"), py::arg("describe"), py::arg("make_state"),
           py::arg("slow"), py::arg("failed"))
      .def("__call__", &FastRun::call, py::arg("fetches"), py::arg("feed_dict") = py::none(),
           py::arg("options") = py::none(), py::arg("run_metadata") = py::none());
  m.def("fast_run_entry", &make_fast_run_entry, py::arg("fast_run"), py::arg("fallback"));

  m.def("floor_loop", &floor_loop, py::arg("tf_session"), py::arg("plan"), py::arg("steps"),
        py::arg("reread") = nullptr, py::arg("reread_period") = 0,
        py::arg("reread_at") = std::vector<int64_t>());
}
