// The plans of flat fetch structures (core/flat_fetch_cache.h), found by a
// match the caller runs where its structure lies (find_if). The match itself,
// kind, leaves and keys by identity, is python_fetches.cc's same_structure,
// tested against TF's Session.run in tests/test_fetch_properties.py.
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
  auto leaf_is = [](const int* leaf) {
    return [leaf](const FlatShape& shape) { return shape.leaves[0] == leaf; };
  };
  FlatFetchPlanPtr oldest = plan_of(FlatKind::kLeaf, {&kA});
  cache.add(oldest);
  for (size_t i = 1; i < FlatFetchCache::kMaxPlans; ++i)
    cache.add(plan_of(FlatKind::kLeaf, {&kB}));
  EXPECT_EQ(cache.find_if(leaf_is(&kA)), oldest);
  FlatFetchPlanPtr newest = plan_of(FlatKind::kLeaf, {&kC});
  cache.add(newest);  // the 33rd: the cache starts over with it
  EXPECT_EQ(cache.find_if(leaf_is(&kA)), nullptr);
  EXPECT_EQ(cache.find_if(leaf_is(&kB)), nullptr);
  EXPECT_EQ(cache.find_if(leaf_is(&kC)), newest);
}

}  // namespace
}  // namespace fastmts
