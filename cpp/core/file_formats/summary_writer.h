// TF's FileWriter (SummaryToEventTransformer) for the records written
// natively: a Summary, SessionLog, GraphDef or MetaGraphDef wrapped in an Event with the wall time and
// step, a summary's repeated metadata dropped, handed to the EventWriter.
// The tags seen so far are shared with the Python FileWriter (its
// _seen_summary_tags), so a user's add_summary on the same writer strips
// metadata exactly as it would next to TF's own hooks.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/file_formats/event_file.h"
#include "core/file_formats/event_writer.h"

namespace fastmts {

// SummaryToEventTransformer's _seen_summary_tags, thread-safe.
class SeenSummaryTags {
 public:
  bool contains(const std::string& tag) const;
  void add(const std::string& tag);
  std::vector<std::string> all() const;

  // The summaries as TF's add_summary writes them one after the other: for
  // each value, in order, metadata dropped when its tag was seen before,
  // else the tag marked seen. For summaries TF's C++ serialized (what its
  // summary ops output), the bytes Python's parse and re-serialization give.
  // nullopt, with no tag marked, when a Summary or Value is not as protobuf
  // serializes it (malformed, fields out of order or repeated, unknown
  // fields, explicit empty text, text that is not UTF-8): TF's own Python
  // must parse them then. The messages inside a value are not checked.
  std::optional<std::vector<std::string>> strip_repeated_metadata(
      const std::vector<std::string_view>& summaries);

 private:
  // One summary of strip_repeated_metadata: tags it marks go to `pending`,
  // a tag sequence to remember as all marked to `new_shapes`.
  std::optional<std::string> strip_one(std::string_view summary,
                                       std::unordered_set<std::string>* pending,
                                       std::vector<std::string>* new_shapes);

  mutable std::mutex mu_;
  std::unordered_set<std::string> tags_;
  // Tag sequences (each tag length-prefixed) of summaries without metadata
  // whose tags are all marked: such a summary again is written as it is.
  std::unordered_set<std::string> known_shapes_;
  std::string last_known_shape_;  // the one met last, checked before hashing
};

class SummaryWriter {
 public:
  SummaryWriter(std::shared_ptr<EventWriter> events, std::shared_ptr<SeenSummaryTags> tags)
      : events_(std::move(events)), tags_(std::move(tags)) {}

  // Whether records can go natively now; when closed, TF's Python runs
  // (it warns that the writer is closed and drops the record).
  bool open() const { return !events_->closed(); }

  // Summaries already through tags()->strip_repeated_metadata (which says
  // when TF's Python must write them instead).
  void add_stripped_summaries(const std::vector<std::string>& summaries, int64_t step);
  void add_simple_value(std::string_view tag, float value, int64_t step);
  void add_session_log_start(int64_t step);
  // A record of bytes TF's protobuf serialized (add_graph's GraphDef,
  // add_meta_graph's MetaGraphDef, add_session_log's SessionLog) as TF's
  // _add_event wraps it; waits for room in the queue, as TF's add_event.
  // False (dropped) once the writer is closed.
  bool add_serialized(EventWhat what, std::string_view payload, int64_t step);

  // add_serialized() in two halves: the record's place in the queue and its
  // wall time taken now, its payload given later (fill_serialized), or
  // never (drop_serialized: no record). nullopt once the writer is closed.
  struct Reserved {
    std::shared_ptr<PendingRecord> record;
    double wall_time = 0;
    EventWhat what = EventWhat::kGraphDef;
    int64_t step = 0;
  };
  std::optional<Reserved> reserve_serialized(EventWhat what, int64_t step);
  void fill_serialized(const Reserved& reserved, std::string_view payload);
  void drop_serialized(const Reserved& reserved) { events_->drop(reserved.record); }

  const std::shared_ptr<EventWriter>& events() const { return events_; }
  const std::shared_ptr<SeenSummaryTags>& tags() const { return tags_; }

 private:
  void add_event(std::string event);
  std::shared_ptr<EventWriter> events_;
  std::shared_ptr<SeenSummaryTags> tags_;
};

}  // namespace fastmts
