// Event files as TF's EventsWriter writes them, without TF's C++ API (which
// is not part of the stable C API): TFRecord framing with masked CRC-32C,
// and Event protos serialized as protobuf serializes them. The writer thread
// that appends them is cpp/core/file_formats/event_writer.h; the records the native hooks
// write, cpp/core/file_formats/summary_writer.h.
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
