// The plans of flat fetch structures (core/flat_fetch_cache.h), found by the
// identity of their leaves: by a shape read from the caller, or by a match
// the caller runs where its structure lies (find_if).
#include "core/flat_fetch_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace fastmts {
namespace {

const int kA = 0, kB = 0, kC = 0;  // three distinct identities

FlatFetchPlanPtr plan_of(FlatKind kind, std::vector<const void*> leaves,
                         std::vector<const void*> keys = {}) {
  auto plan = std::make_shared<FlatFetchPlan>();
  plan->shape.kind = kind;
  plan->shape.leaves = std::move(leaves);
  plan->shape.keys = std::move(keys);
  plan->fast = true;
  return plan;
}

TEST(FlatFetchCache, FindsAPlanByKindLeavesAndKeys) {
  FlatFetchCache cache;
  FlatFetchPlanPtr list = plan_of(FlatKind::kList, {&kA, &kB});
  FlatFetchPlanPtr dict = plan_of(FlatKind::kDict, {&kA, &kB}, {&kC, &kA});
  cache.add(list);
  cache.add(dict);
  EXPECT_EQ(cache.find(list->shape), list);
  EXPECT_EQ(cache.find(dict->shape), dict);
  FlatShape tuple = list->shape;
  tuple.kind = FlatKind::kTuple;  // the same leaves in another kind
  EXPECT_EQ(cache.find(tuple), nullptr);
  FlatShape other = list->shape;
  other.leaves[1] = &kC;
  EXPECT_EQ(cache.find(other), nullptr);
}

TEST(FlatFetchCache, FindIfReturnsTheFirstPlanItsMatchAccepts) {
  FlatFetchCache cache;
  FlatFetchPlanPtr first = plan_of(FlatKind::kLeaf, {&kA});
  FlatFetchPlanPtr second = plan_of(FlatKind::kLeaf, {&kB});
  cache.add(first);
  cache.add(second);
  int asked = 0;
  auto is_b = [&](const FlatShape& shape) {
    ++asked;
    return shape.leaves[0] == &kB;
  };
  EXPECT_EQ(cache.find_if(is_b), second);
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(cache.find_if([](const FlatShape&) { return false; }), nullptr);
}

TEST(FlatFetchCache, StartsOverWhenFull) {
  FlatFetchCache cache;
  FlatFetchPlanPtr oldest = plan_of(FlatKind::kLeaf, {&kA});
  cache.add(oldest);
  for (size_t i = 1; i < FlatFetchCache::kMaxPlans; ++i)
    cache.add(plan_of(FlatKind::kLeaf, {&kB}));
  EXPECT_EQ(cache.find(oldest->shape), oldest);
  FlatFetchPlanPtr newest = plan_of(FlatKind::kLeaf, {&kC});
  cache.add(newest);  // the 33rd: the cache starts over with it
  EXPECT_EQ(cache.find(oldest->shape), nullptr);
  EXPECT_EQ(cache.find(newest->shape), newest);
}

}  // namespace
}  // namespace fastmts
