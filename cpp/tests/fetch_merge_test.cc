// Fetch and feed merging (core/fetch_merge.h): the parties' fetches and
// targets deduplicated into one run, each party told where its values are,
// feeds merged with TF's conflict rule, merges cached by plan combination.
// Operations are stand-in addresses: nothing here calls TensorFlow.
#include "core/fetch_merge.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace fastmts {
namespace {

// Distinct TF_Operation* values that are never dereferenced.
TF_Operation* op(int i) {
  static char ops[64];
  return reinterpret_cast<TF_Operation*>(&ops[i]);
}

TF_Output out(int op_index, int index = 0) { return TF_Output{op(op_index), index}; }

PlanPtr plan(std::vector<TF_Output> fetches, std::vector<TF_Operation*> targets = {}) {
  auto p = std::make_shared<RunPlan>();
  p->fetches = std::move(fetches);
  p->targets = std::move(targets);
  return p;
}

void expect_same(const std::vector<TF_Output>& got, const std::vector<TF_Output>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_output(got[i], want[i])) << i;
}

TEST(MergeFetches, SharedFetchesAreFetchedOnceAndEachPartyFindsItsOwn) {
  const PlanPtr hook = plan({out(1), out(2)}, {op(9)});
  const PlanPtr caller = plan({out(2), out(3), out(1, 1)}, {op(9), op(8)});
  const MergedFetches merged = merge_fetches({{hook, false}, {caller, true}});
  expect_same(merged.fetches, {out(1), out(2), out(3), out(1, 1)});
  EXPECT_EQ(merged.targets, (std::vector<TF_Operation*>{op(9), op(8)}));
  EXPECT_EQ(merged.where[0], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(merged.where[1], (std::vector<size_t>{1, 2, 3}));
  // Only what a party that keeps its values fetches must be the step's own.
  EXPECT_EQ(merged.must_own, (std::vector<char>{0, 1, 1, 1}));
}

TEST(MergeFetches, APartyWithoutAPlanFetchesNothing) {
  const PlanPtr none;
  const MergedFetches merged = merge_fetches({{none, true}, {plan({out(4)}), true}});
  expect_same(merged.fetches, {out(4)});
  EXPECT_TRUE(merged.where[0].empty());
  EXPECT_EQ(merged.where[1], (std::vector<size_t>{0}));
}

TEST(MergeFetches, ManyFetchesAreDeduplicatedAsFewAre) {
  // Past the linear scan's limit the index is a hash map: the same result.
  std::vector<TF_Output> first, second;
  for (int i = 0; i < 50; ++i) first.push_back(out(i % 60, i / 60));
  for (int i = 49; i >= 0; i -= 2) second.push_back(out(i % 60, i / 60));
  second.push_back(out(55, 3));
  const MergedFetches merged = merge_fetches({{plan(first), true}, {plan(second), true}});
  EXPECT_EQ(merged.fetches.size(), 51u);
  for (size_t i = 0; i < second.size(); ++i)
    EXPECT_TRUE(same_output(merged.fetches[merged.where[1][i]], second[i])) << i;
  EXPECT_EQ(merged.where[1].back(), 50u);
}

TEST(MergedFetchCache, TheSameCombinationGetsTheSameMerge) {
  MergedFetchCache cache;
  const PlanPtr a = plan({out(1)}), b = plan({out(2)});
  std::vector<PartyFetches> parties = {{a, false}, {b, true}};
  auto party = [&parties](size_t i) { return parties[i]; };
  const MergeEntry first = cache.get(2, party);
  EXPECT_EQ(cache.get(2, party).merged, first.merged);
  parties[0].keeps_values = true;  // another combination: another merge
  const MergeEntry other = cache.get(2, party);
  EXPECT_NE(other.merged, first.merged);
  EXPECT_EQ(other.merged->must_own, (std::vector<char>{1, 1}));
  MergedFetchMemo memo;
  EXPECT_EQ(&memo.get(cache, 2, party), other.merged.get());
  EXPECT_EQ(&memo.get(cache, 2, party), other.merged.get());
}

RunRequest feeding(std::vector<std::pair<TF_Output, std::string>> feeds) {
  auto feed_plan = std::make_shared<FeedPlan>();
  RunRequest request;
  for (auto& [key, label] : feeds) {
    feed_plan->keys.push_back(key);
    feed_plan->dtypes.push_back(TF_FLOAT);
    feed_plan->labels.push_back(label);
    request.feed_values.emplace_back();  // no tensor: only the keys are merged
  }
  request.feed_plan = feed_plan;
  return request;
}

TEST(FeedMerger, FeedsOfSeveralPartiesAreMergedInOrder) {
  FeedMerger merger;
  merger.add(RunRequest(), "unused");  // a party that feeds nothing
  merger.add(feeding({{out(1), "<tf.Tensor 'a:0'>"}}), "unused");
  merger.add(feeding({{out(2), "'b:0'"}}), "unused");
  expect_same(merger.keys, {out(1), out(2)});
  EXPECT_EQ(merger.values.size(), 2u);
}

TEST(FeedMerger, TheSameKeyFedTwiceIsAConflict) {
  FeedMerger merger;
  merger.add(feeding({{out(1), "'a:0'"}, {out(2), "'b:0'"}}), "");
  try {
    merger.add(feeding({{out(1), "'a:0'"}, {out(2), "'b:0'"}}), "Same tensor is fed by two hooks.");
    FAIL() << "no conflict raised";
  } catch (const FeedConflictError& e) {
    EXPECT_STREQ(e.what(), "Same tensor is fed by two hooks. Conflict(s): ['a:0', 'b:0']");
  }
}

TEST(FeedMerger, TwoSpellingsOfOneTensorAreNoConflictAndTheLaterWins) {
  FeedMerger merger;
  merger.add(feeding({{out(1), "<tf.Tensor 'a:0'>"}}), "");
  merger.add(feeding({{out(1), "'a:0'"}}), "");
  expect_same(merger.keys, {out(1)});
}

}  // namespace
}  // namespace fastmts
