// Binding glue: flat fetch structures (cpp/core/flat_fetch_cache.h) read from
// Python objects, resolved through Python once, and their results built as
// TF's Session.run builds them.
#pragma once

#include <pybind11/pybind11.h>

#include <utility>
#include <vector>

#include "core/flat_fetch_cache.h"

namespace fastmts {

class PythonFlatFetches {
 public:
  // `leaf_types`: what a leaf may be (Tensor, Operation, Variable).
  // `describe(fetches)` (Python, once per structure) gives (RunPlan, layout)
  // or None when TF must build the results itself.
  PythonFlatFetches(pybind11::tuple leaf_types, pybind11::object describe)
      : leaf_types_(std::move(leaf_types)), describe_(std::move(describe)) {}

  // The plan of `fetches` if it is a flat structure whose results are built
  // natively, else null (not flat, TF builds its results, or TF cannot
  // resolve it: the caller's slow path then raises TF's error).
  FlatFetchPlanPtr find(pybind11::handle fetches);

  // The results of a step, shaped as `fetches` was: each leaf's value.
  static pybind11::object build(const FlatFetchPlan& plan, const std::vector<SharedTensor>& outputs);

 private:
  bool read(pybind11::handle fetches, FlatShape* shape);
  bool is_leaf_type(PyTypeObject* type);
  FlatFetchPlanPtr add(pybind11::handle fetches, const FlatShape& shape);

  pybind11::tuple leaf_types_;
  pybind11::object describe_;
  // isinstance(leaf, leaf_types) per exact type (TF's leaf classes are ABCs,
  // whose isinstance check runs Python); the types are held.
  std::vector<std::pair<pybind11::object, bool>> leaf_type_verdicts_;
  FlatFetchCache cache_;
};

}  // namespace fastmts
