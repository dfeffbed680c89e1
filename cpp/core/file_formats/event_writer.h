// The writer thread of TF's EventFileWriter, natively: one queue of
// serialized Events, one thread appending them as TFRecords to the event
// file, flushing as TF's _EventLoggerThread does (the first event at once,
// then after each event written more than flush_secs after the previous
// flush, and on flush()/close()). Records from native hooks and from
// Python's add_event share the queue, so they land in the order they were
// added, and no Python thread wakes per record.
//
// The file itself is TF's: the caller's `create_file` makes a new one with
// TF's EventsWriter (its name, its release's first record, flushed) and
// returns its name; this writer only appends. A writer starts on a file TF
// already made (opened at construction, so it holds the file as TF's writer
// held it, its directory removed or not), or with none, and after close() +
// reopen() the next event goes to a new file, as in TF. When no file can be made (its directory
// removed, say), TF's EventsWriter logs that the write failed and drops the
// event, and so does this writer: `create_file` logs it, and the next event
// tries again.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

namespace fastmts {

// The writer thread failed (a file that cannot be created, written or
// flushed). The next add/flush/close raises it, and the writer is closed
// from then on, as TF's EventFileWriter does with its thread's failure.
class EventWriterError : public std::runtime_error {
 public:
  // The Python exception TF (2.2 on) raises for a failed EventsWriter call: by
  // the status code the file system's errno maps to (INVALID_ARGUMENT is a
  // ValueError, OUT_OF_RANGE an IndexError, UNIMPLEMENTED a
  // NotImplementedError, any other a RuntimeError).
  enum class Kind { kRuntime, kValue, kIndex, kNotImplemented };
  explicit EventWriterError(const std::string& what, Kind kind = Kind::kRuntime)
      : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// What a failed flush, sync or close of the event file does, as in the TF
// release whose EventsWriter made the file: from TF 2.2 it raises (TF's
// writer thread logs the error, here `report`, and ends); before, it returns
// a status TF's Python drops, and writing goes on.
struct EventFileFailures {
  bool raised = true;
  std::function<void(const std::string& message)> report;  // may be empty
};

// A record whose place in the queue is taken before its bytes exist (a
// graph record serialized in the background): the writer thread waits at
// it, so records queued after it still land after it.
struct PendingRecord {
  enum class State { kWaiting, kFilled, kDropped };
  State state = State::kWaiting;  // guarded by the writer's lock
  std::string bytes;
};

class EventWriter {
 public:
  // Makes a new event file with its first record and returns its name, or
  // nullopt (having logged it as TF does) when the file cannot be made.
  // Runs on the writer thread; throws when it fails otherwise.
  using CreateFile = std::function<std::optional<std::string>()>;

  // `filename`: the file to append to, opened here (throws EventWriterError
  // if it cannot be), or empty to create one for the first event. `next_flush_time` (seconds since the epoch): when the first
  // event written is flushed at the latest (0: at once, as TF's new thread).
  // `max_queue` bounds the events waiting for a caller that waits for room.
  EventWriter(std::string filename, size_t max_queue, double flush_secs,
              double next_flush_time, CreateFile create_file,
              EventFileFailures failures = {});
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // Queues one serialized Event; false (nothing queued) once closed. With
  // `wait_for_room`, blocks while max_queue events wait (TF's add_event);
  // native hooks never block on it. Throws EventWriterError after a failure.
  bool add(std::string event, bool wait_for_room);
  // Takes the next place in the queue for an event given later by fill()
  // (or given up by drop(): nothing is written); nullptr once closed. The
  // writer thread, flush() and close() wait for it: one of the two must come.
  std::shared_ptr<PendingRecord> reserve();
  void fill(const std::shared_ptr<PendingRecord>& record, std::string event);
  void drop(const std::shared_ptr<PendingRecord>& record);
  // Returns once every event queued before is written and the file flushed.
  void flush();
  // Flushes, ends the thread and closes the file; later adds are dropped.
  void close();
  // After close(): starts again; the next event goes to a new file.
  void reopen();
  bool closed() const;
  // The file appended to now (empty before the first one exists).
  std::string filename() const;

 private:
  enum class Kind { kEvent, kFlush, kStop, kPending };
  struct Item {
    Kind kind;
    std::string bytes;
    uint64_t flush_id = 0;
    std::shared_ptr<PendingRecord> pending;  // kPending
  };
  // Whether the thread can take the queue's first item (mu_ held).
  bool front_ready() const;
  void resolve(const std::shared_ptr<PendingRecord>& record, PendingRecord::State state,
               std::string event);

  void start_thread();
  void run();
  void push(Item item, bool wait_for_room, std::unique_lock<std::mutex>& lock);
  // Raises the thread's failure once; the writer is closed from then on.
  void throw_if_failed();  // mu_ held
  // Writer thread only:
  void write(const std::string& event);
  void flush_file();
  void close_file();
  void fail(const EventWriterError& error);

  const size_t max_queue_;
  const double flush_secs_;
  const CreateFile create_file_;
  const EventFileFailures failures_;

  mutable std::mutex mu_;
  std::condition_variable queued_, dequeued_, flushed_;
  std::deque<Item> queue_;
  bool closed_ = false;
  bool failed_ = false;
  std::string failure_;
  EventWriterError::Kind failure_kind_ = EventWriterError::Kind::kRuntime;
  uint64_t flush_requested_ = 0, flush_done_ = 0;
  std::string filename_;  // guarded by mu_ for readers; written by the thread
  std::thread thread_;

  // Writer thread state.
  std::FILE* file_ = nullptr;
  int64_t outstanding_ = 0;
  double next_flush_time_;
};

}  // namespace fastmts
