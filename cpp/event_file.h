// Event files as TF's EventsWriter writes them, without TF's C++ API (which
// is not part of the stable C API): TFRecord framing with masked CRC-32C,
// Event protos serialized as protobuf serializes them, and the file's
// life (name, first record, flush, a deleted file replaced).
//
// Work in progress (issue 27): not yet used by the hooks. The plan:
// * The file itself stays TF's: TF's EventsWriter (`_pywrap_events_writer`,
//   made by TF's EventFileWriter) creates it, names it and writes its first
//   record (file_version, and from some release on source_metadata: what
//   each release writes is its own), and flushes it. Native code then
//   appends records to that file (its name from `FileName()`), so the first
//   record is byte for byte the release's own.
// * A native writer thread replaces the EventFileWriter's Python queue and
//   thread for the FileWriterCache writers fastmts makes: records from the
//   native hooks (StepCounterHook's rates, SummarySaverHook's summaries with
//   repeated metadata dropped as SummaryToEventTransformer does, session
//   logs) and from Python `add_event` (serialized there) share one queue, so
//   a user's add_summary lands in order. Flush as TF's thread: the first
//   event, then every flush_secs, and flush()/close() (flush + fsync + the
//   "file still exists" check; a deleted file is replaced by a new one,
//   made again by TF's EventsWriter).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace fastmts {

// CRC-32C (Castagnoli) of `data`, and the masked form TFRecord stores:
// ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t crc32c(std::string_view data);
uint32_t masked_crc32c(std::string_view data);

// One TFRecord: the length (little-endian uint64), its masked CRC, the
// data, the data's masked CRC.
std::string tfrecord(std::string_view data);

// The Event fields that hold what an event is (its oneof `what`).
enum class EventWhat : int {
  kFileVersion = 3,
  kGraphDef = 4,
  kSummary = 5,
  kSessionLog = 7,
  kTaggedRunMetadata = 8,
  kMetaGraphDef = 9,
};

// A serialized Event: wall_time (1), step (2), and `what` in its field, as
// protobuf serializes them (field order, zero wall_time and step left out,
// the oneof member always written).
std::string event_bytes(double wall_time, int64_t step, EventWhat what, std::string_view payload);

// A serialized Summary of one simple_value (StepCounterHook's records).
std::string simple_value_summary(std::string_view tag, float value);

}  // namespace fastmts
