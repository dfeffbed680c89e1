// How one step's parties -- the hooks in order, then the caller -- share one
// TF_SessionRun, as in TF's _HookedSession: their fetches and targets are
// deduplicated into one list and each party learns where its values are;
// their feeds are merged with TF's conflict rules.
//
// A step's fetch merge depends only on which plans the parties ask for, and
// a training loop asks for one of a few combinations (the usual step, the
// step where a hook also logs or saves), so merges are cached by plan.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/run_plan.h"

namespace fastmts {

// Raised when two parties feed the same tensor (TF raises RuntimeError).
class FeedConflictError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One party's wish for fetches: its plan (may be null) and whether it keeps
// the values (Hook::keeps_values; the caller always does).
struct PartyFetches {
  const PlanPtr& plan;
  bool keeps_values;
};

struct MergedFetches {
  std::vector<TF_Output> fetches;
  std::vector<TF_Operation*> targets;
  std::vector<std::vector<size_t>> where;  // per party: its fetches in `fetches`
  // Per fetch: some party keeps the value, so it must be the step's own
  // rather than a view of live state (see SessionRunner::run).
  std::vector<char> must_own;
};

MergedFetches merge_fetches(const std::vector<PartyFetches>& parties);

// A merge with the plan combination it was made for.
struct MergeEntry {
  std::vector<PlanPtr> plans;  // kept alive, so their addresses stay theirs
  std::vector<char> keeps;
  std::shared_ptr<const MergedFetches> merged;

  // Whether `n` parties, `party(i)` giving each one's PartyFetches, ask
  // for exactly this combination.
  template <typename PartyFn>
  bool matches(size_t n, PartyFn& party) const;
};

// The merges of the last few plan combinations. Thread-safe.
class MergedFetchCache {
 public:
  // The merge for `n` parties, `party(i)` giving each one's PartyFetches.
  template <typename PartyFn>
  MergeEntry get(size_t n, PartyFn&& party);

 private:
  static constexpr size_t kEntries = 8;
  std::mutex mu_;
  std::vector<MergeEntry> entries_;  // most recently used first
};

// A one-entry memo in front of a MergedFetchCache, for one thread at a time
// (a step's scratch, HookedSession): a step that asks for the same plans as
// the step before finds its merge with no lock taken and no count moved.
class MergedFetchMemo {
 public:
  template <typename PartyFn>
  const MergedFetches& get(MergedFetchCache& cache, size_t n, PartyFn&& party) {
    if (!last_.merged || !last_.matches(n, party)) last_ = cache.get(n, party);
    return *last_.merged;
  }

 private:
  MergeEntry last_;
};

// The feeds of the parties that feed anything, merged in order.
class FeedMerger {
 public:
  // Adds a party's feeds. TF compares feed_dict keys: the same key object fed
  // twice is a conflict (`conflict_message`); two spellings of one tensor (a
  // Tensor and its name) are not, and the later one wins.
  void add(const RunRequest& request, const char* conflict_message);

  std::vector<TF_Output> keys;
  std::vector<TF_Tensor*> values;

 private:
  std::vector<std::string> labels_;
};

template <typename PartyFn>
bool MergeEntry::matches(size_t n, PartyFn& party) const {
  if (plans.size() != n) return false;
  for (size_t i = 0; i < n; ++i) {
    PartyFetches p = party(i);
    if (p.plan != plans[i] || p.keeps_values != static_cast<bool>(keeps[i])) return false;
  }
  return true;
}

template <typename PartyFn>
MergeEntry MergedFetchCache::get(size_t n, PartyFn&& party) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t e = 0; e < entries_.size(); ++e) {
    if (!entries_[e].matches(n, party)) continue;
    if (e) std::swap(entries_[0], entries_[e]);
    return entries_[0];
  }
  MergeEntry entry;
  std::vector<PartyFetches> parties;
  parties.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    parties.push_back(party(i));
    entry.plans.push_back(parties.back().plan);
    entry.keeps.push_back(parties.back().keeps_values);
  }
  entry.merged = std::make_shared<const MergedFetches>(merge_fetches(parties));
  if (entries_.size() == kEntries) entries_.pop_back();
  entries_.insert(entries_.begin(), entry);
  return entry;
}

}  // namespace fastmts
