#include "binding/python_fetches.h"

#include <pybind11/stl.h>

#include <stdexcept>

#include "binding/python_conversion.h"

namespace py = pybind11;

namespace fastmts {
namespace {

// A plan that holds its structure's leaves and keys, so their identities
// stay theirs while it is cached. Freed with the GIL held: caches live in
// objects Python owns.
struct HeldFlatFetchPlan : FlatFetchPlan {
  std::vector<py::object> held;
};

// The object whose identity a FlatShape holds.
PyObject* object_of(const void* identity) {
  return static_cast<PyObject*>(const_cast<void*>(identity));
}

// Calls item(key, leaf) on each of `f`'s items in order (key null but in a
// dict; `f` itself is the one leaf of anything else) while it returns true;
// `f`'s kind. What reading a structure and comparing one in place share.
template <class Item>
FlatKind each_item(PyObject* f, Item item) {
  if (PyList_CheckExact(f)) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(f) && item(nullptr, PyList_GET_ITEM(f, i)); ++i) {}
    return FlatKind::kList;
  }
  if (PyTuple_CheckExact(f)) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(f) && item(nullptr, PyTuple_GET_ITEM(f, i)); ++i) {}
    return FlatKind::kTuple;
  }
  if (PyDict_CheckExact(f)) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(f, &pos, &key, &value) && item(key, value)) {}
    return FlatKind::kDict;
  }
  item(nullptr, f);
  return FlatKind::kLeaf;
}

// Is `f` the structure `shape` was read from: the same kind, leaves and keys
// (by identity)? Compared in place, with no copy. The leaves' types need no
// check: a cached structure's leaves passed it when it was read.
bool same_structure(PyObject* f, const FlatShape& shape) {
  size_t i = 0;
  bool same = true;
  const FlatKind kind = each_item(f, [&](PyObject* key, PyObject* leaf) {
    same = i < shape.leaves.size() && leaf == shape.leaves[i] &&
           (!key || (i < shape.keys.size() && key == shape.keys[i]));
    ++i;
    return same;
  });
  return same && kind == shape.kind && i == shape.leaves.size();
}
}  // namespace

FlatFetchPlanPtr PythonFlatFetches::find(py::handle fetches) {
  // A step fetches what it fetched before: compared in place first. Reading
  // the structure into a FlatShape every step cost a heap allocation for its
  // leaves, about 116 instructions of fastmts's ~5,300 a step (callgrind).
  FlatFetchPlanPtr plan =
      cache_.find_if([&](const FlatShape& shape) { return same_structure(fetches.ptr(), shape); });
  if (!plan) {
    FlatShape shape;
    if (!read(fetches, &shape)) return nullptr;
    plan = add(fetches, shape);
  }
  return plan && plan->fast ? plan : nullptr;
}

py::object PythonFlatFetches::build(const FlatFetchPlan& plan,
                                    const std::vector<SharedTensor>& outputs) {
  auto value = [&](size_t i) -> py::object {
    return plan.layout[i] < 0 ? py::object(py::none()) : to_python(outputs.at(plan.layout[i]));
  };
  const size_t n = plan.layout.size();
  switch (plan.shape.kind) {
    case FlatKind::kLeaf: return value(0);
    case FlatKind::kList: {
      py::list out(n);
      for (size_t i = 0; i < n; ++i) out[i] = value(i);
      return std::move(out);
    }
    case FlatKind::kTuple: {
      py::tuple out(n);
      for (size_t i = 0; i < n; ++i) out[i] = value(i);
      return std::move(out);
    }
    case FlatKind::kDict: {
      py::dict out;
      for (size_t i = 0; i < n; ++i)
        out[py::handle(object_of(plan.shape.keys[i]))] = value(i);
      return std::move(out);
    }
  }
  throw std::logic_error("fastmts: bad fetch kind");
}

// Borrowed references: valid during this call.
bool PythonFlatFetches::read(py::handle fetches, FlatShape* shape) {
  shape->kind = each_item(fetches.ptr(), [&](PyObject* key, PyObject* leaf) {
    if (key) shape->keys.push_back(key);
    shape->leaves.push_back(leaf);
    return true;
  });
  for (const void* leaf : shape->leaves)
    if (!is_leaf_type(Py_TYPE(object_of(leaf)))) return false;
  return true;
}

bool PythonFlatFetches::is_leaf_type(PyTypeObject* type) {
  for (const auto& [known, is_leaf] : leaf_type_verdicts_)
    if (known.ptr() == reinterpret_cast<PyObject*>(type)) return is_leaf;
  const int is_leaf = PyObject_IsSubclass(reinterpret_cast<PyObject*>(type), leaf_types_.ptr());
  if (is_leaf < 0) throw py::error_already_set();
  leaf_type_verdicts_.emplace_back(
      py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(type)), is_leaf != 0);
  return is_leaf != 0;
}

// A structure that cannot be resolved (TF raises) is not cached.
FlatFetchPlanPtr PythonFlatFetches::add(py::handle fetches, const FlatShape& shape) {
  py::object described;
  try {
    described = describe_(fetches);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_Exception)) throw;
    return nullptr;
  }
  auto plan = std::make_shared<HeldFlatFetchPlan>();
  plan->shape = shape;
  for (const auto* identities : {&shape.leaves, &shape.keys})
    for (const void* p : *identities) plan->held.push_back(py::reinterpret_borrow<py::object>(object_of(p)));
  plan->fast = !described.is_none();
  if (plan->fast) {
    py::tuple t = described;
    plan->request.plan = t[0].cast<std::shared_ptr<RunPlan>>();
    plan->layout = t[1].cast<std::vector<int>>();
    if (plan->layout.size() != shape.leaves.size())
      throw std::logic_error("fastmts: bad fetch layout");
  }
  cache_.add(plan);
  return plan;
}

}  // namespace fastmts
