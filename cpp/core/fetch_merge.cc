#include "core/fetch_merge.h"

#include <unordered_map>
#include <utility>

namespace fastmts {

namespace {

// Finds or appends fetches: a linear scan for the usual handful, a hash
// index once there are many.
class FetchIndex {
 public:
  explicit FetchIndex(std::vector<TF_Output>* fetches) : fetches_(*fetches) {}

  size_t add(const TF_Output& out) {
    if (fetches_.size() < kLinearLimit) {
      for (size_t i = 0; i < fetches_.size(); ++i)
        if (same_output(fetches_[i], out)) return i;
    } else {
      if (index_.empty())
        for (size_t i = 0; i < fetches_.size(); ++i) index_.emplace(key(fetches_[i]), i);
      auto it = index_.find(key(out));
      if (it != index_.end()) return it->second;
      index_.emplace(key(out), fetches_.size());
    }
    fetches_.push_back(out);
    return fetches_.size() - 1;
  }

 private:
  using Key = std::pair<TF_Operation*, int>;
  static Key key(const TF_Output& o) { return {o.oper, o.index}; }
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<void*>()(k.first) ^ (static_cast<size_t>(k.second) * 0x9e3779b97f4a7c15ULL);
    }
  };
  static constexpr size_t kLinearLimit = 32;
  std::vector<TF_Output>& fetches_;
  std::unordered_map<Key, size_t, KeyHash> index_;
};

}  // namespace

MergedFetches merge_fetches(const std::vector<PartyFetches>& parties) {
  MergedFetches merged;
  FetchIndex index(&merged.fetches);
  merged.where.resize(parties.size());
  for (size_t p = 0; p < parties.size(); ++p) {
    if (!parties[p].plan) continue;
    const RunPlan& plan = *parties[p].plan;
    std::vector<size_t>& where = merged.where[p];
    where.reserve(plan.fetches.size());
    for (const TF_Output& out : plan.fetches) {
      where.push_back(index.add(out));
      if (merged.must_own.size() < merged.fetches.size()) merged.must_own.resize(merged.fetches.size(), 0);
      if (parties[p].keeps_values) merged.must_own[where.back()] = 1;
    }
    for (TF_Operation* op : plan.targets) {
      bool seen = false;
      for (TF_Operation* t : merged.targets) seen = seen || t == op;
      if (!seen) merged.targets.push_back(op);
    }
  }
  return merged;
}

void FeedMerger::add(const RunRequest& request, const char* conflict_message) {
  if (!request.feed_plan) return;
  const FeedPlan& plan = *request.feed_plan;
  std::vector<std::string> conflicts;
  for (size_t i = 0; i < plan.keys.size(); ++i) {
    size_t j = 0;
    while (j < keys.size() && !same_output(keys[j], plan.keys[i])) ++j;
    if (j == keys.size()) {
      keys.push_back(plan.keys[i]);
      values.push_back(request.feed_values[i].get());
      labels_.push_back(plan.labels[i]);
      continue;
    }
    if (labels_[j] == plan.labels[i]) conflicts.push_back(plan.labels[i]);
    values[j] = request.feed_values[i].get();
    labels_[j] = plan.labels[i];
  }
  if (conflicts.empty()) return;
  std::string message = conflict_message;
  message += " Conflict(s): [";
  for (size_t i = 0; i < conflicts.size(); ++i) {
    if (i) message += ", ";
    message += conflicts[i];
  }
  message += "]";
  throw FeedConflictError(message);
}

}  // namespace fastmts
