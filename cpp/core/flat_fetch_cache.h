// The run plans of flat fetch structures, found by the identity of their
// leaves. Knows nothing of Python: identities are opaque pointers.
//
// Training loops and hooks fetch a tensor, an operation or a variable alone,
// or a flat list, tuple or dict of them, the same objects every step. Such a
// structure is resolved once (by TF's own fetch handling, in Python), and
// later steps find its plan by comparing the leaves' (and dict keys')
// identities: no hashing, no Python.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/run_plan.h"

namespace fastmts {

enum class FlatKind { kLeaf, kList, kTuple, kDict };

// A flat structure as seen in one call: its kind and the identities of its
// leaves and (for a dict, in iteration order) its keys.
struct FlatShape {
  FlatKind kind = FlatKind::kLeaf;
  std::vector<const void*> leaves, keys;
};

// What is known of one structure seen before. The caller keeps the leaves
// and keys alive for as long as the plan lives (a subclass may hold them),
// so their identities stay theirs.
struct FlatFetchPlan {
  FlatShape shape;
  // false: seen, and not one whose results the fast path builds (TF must);
  // the structure is remembered so it is not resolved again.
  bool fast = false;
  // layout[i]: leaf i's index among request.plan's fetches, -1 for an
  // operation (its result is None).
  std::vector<int> layout;
  RunRequest request;
};
using FlatFetchPlanPtr = std::shared_ptr<const FlatFetchPlan>;

// A few structures per session (the training step, each hook's wish). When
// it is full the cache starts over: a loop that builds a new structure each
// step costs one resolve per step, as it would without the cache.
class FlatFetchCache {
 public:
  static constexpr size_t kMaxPlans = 32;

  // The first plan, fast or not, for which `match(plan.shape)` holds, or
  // null: the caller compares its structure where it lies, without copying
  // it (python_fetches.cc's same_structure).
  template <class Match>
  FlatFetchPlanPtr find_if(const Match& match) const {
    for (const FlatFetchPlanPtr& p : plans_)
      if (match(p->shape)) return p;
    return nullptr;
  }

  void add(FlatFetchPlanPtr plan) {
    if (plans_.size() >= kMaxPlans) plans_.clear();
    plans_.push_back(std::move(plan));
  }

 private:
  std::vector<FlatFetchPlanPtr> plans_;
};

}  // namespace fastmts
