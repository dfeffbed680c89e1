#include "core/file_formats/event_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "core/file_formats/event_file.h"

namespace fastmts {
namespace {

// time.time(), as TF's writer thread reads it for its flush schedule.
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string os_error(const std::string& what, const std::string& filename) {
  return what + " " + filename + ": " + std::strerror(errno);
}

// The Python exception TF's EventsWriter (2.2 on) raises for a file system error:
// TF maps errno to a status code, and its Python binding maps three codes to
// their own exceptions (see EventWriterError::Kind).
EventWriterError::Kind kind_of_errno(int err) {
  switch (err) {
    case EINVAL: case ENAMETOOLONG: case E2BIG: case EDESTADDRREQ: case EDOM: case EFAULT:
    case EILSEQ: case ENOPROTOOPT: case ENOSTR: case ENOTSOCK: case ENOTTY: case EPROTOTYPE:
    case ESPIPE:
      return EventWriterError::Kind::kValue;  // INVALID_ARGUMENT
    case EFBIG: case EOVERFLOW: case ERANGE:
      return EventWriterError::Kind::kIndex;  // OUT_OF_RANGE
    case ENOSYS: case ENOTSUP: case EAFNOSUPPORT: case EPFNOSUPPORT: case EPROTONOSUPPORT:
    case ESOCKTNOSUPPORT: case EXDEV:
      return EventWriterError::Kind::kNotImplemented;  // UNIMPLEMENTED
    default:
      return EventWriterError::Kind::kRuntime;
  }
}

// A failed file operation as TF's status reads: the file system's error
// for the file, then what was being done (`context`, may be empty).
EventWriterError file_error(const std::string& filename, int err, const std::string& context) {
  std::string message = filename + "; " + std::strerror(err);
  if (!context.empty()) message += "\n\t" + context;
  return EventWriterError(message, kind_of_errno(err));
}

}  // namespace

EventWriter::EventWriter(std::string filename, size_t max_queue, double flush_secs,
                         double next_flush_time, CreateFile create_file,
                         EventFileFailures failures)
    : max_queue_(max_queue),
      flush_secs_(flush_secs),
      create_file_(std::move(create_file)),
      failures_(std::move(failures)),
      filename_(std::move(filename)),
      next_flush_time_(next_flush_time) {
  // The file TF's writer made is opened now, while TF still holds it open:
  // from here on it is this writer's, as TF's stays its own, whatever
  // happens to its directory (removed, its name taken) before the next write.
  if (!filename_.empty()) {
    file_ = std::fopen(filename_.c_str(), "ab");
    if (file_ == nullptr) throw EventWriterError(os_error("Could not open events file", filename_));
  }
  start_thread();
}

EventWriter::~EventWriter() {
  try {
    close();
  } catch (...) {
    // A failure was already raised to whoever used the writer; a destructor
    // has no one to tell.
  }
  if (thread_.joinable()) thread_.join();
  if (file_ != nullptr) std::fclose(file_);
}

void EventWriter::start_thread() { thread_ = std::thread([this] { run(); }); }

void EventWriter::throw_if_failed() {
  if (!failed_) return;
  failed_ = false;
  closed_ = true;  // TF's writer closes itself when it raises the failure
  throw EventWriterError(failure_, failure_kind_);
}

void EventWriter::push(Item item, bool wait_for_room, std::unique_lock<std::mutex>& lock) {
  if (wait_for_room && max_queue_ > 0)
    dequeued_.wait(lock, [&] { return failed_ || queue_.size() < max_queue_; });
  throw_if_failed();
  queue_.push_back(std::move(item));
  queued_.notify_one();
}

bool EventWriter::add(std::string event, bool wait_for_room) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return false;
  push(Item{Kind::kEvent, std::move(event)}, wait_for_room, lock);
  return true;
}

std::shared_ptr<PendingRecord> EventWriter::reserve() {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return nullptr;
  auto record = std::make_shared<PendingRecord>();
  Item item{Kind::kPending};
  item.pending = record;
  push(std::move(item), /*wait_for_room=*/false, lock);
  return record;
}

void EventWriter::resolve(const std::shared_ptr<PendingRecord>& record,
                          PendingRecord::State state, std::string event) {
  if (record == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (record->state != PendingRecord::State::kWaiting) return;
  record->state = state;
  record->bytes = std::move(event);
  queued_.notify_all();
}

void EventWriter::fill(const std::shared_ptr<PendingRecord>& record, std::string event) {
  resolve(record, PendingRecord::State::kFilled, std::move(event));
}

void EventWriter::drop(const std::shared_ptr<PendingRecord>& record) {
  resolve(record, PendingRecord::State::kDropped, {});
}

bool EventWriter::front_ready() const {
  if (queue_.empty()) return false;
  const Item& front = queue_.front();
  return front.kind != Kind::kPending || front.pending->state != PendingRecord::State::kWaiting;
}

void EventWriter::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return;
  const uint64_t id = ++flush_requested_;
  push(Item{Kind::kFlush, {}, id}, true, lock);
  flushed_.wait(lock, [&] { return failed_ || flush_done_ >= id; });
  throw_if_failed();
}

void EventWriter::close() {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return;
  // As TF: flush, then end the thread (the stop closes the file, which
  // flushes it); a failure not raised yet is raised now.
  if (!failed_) {
    queue_.push_back(Item{Kind::kStop});
    queued_.notify_one();
  }
  closed_ = true;
  lock.unlock();
  if (thread_.joinable()) thread_.join();
  lock.lock();
  throw_if_failed();
}

void EventWriter::reopen() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!closed_) return;
  if (thread_.joinable()) thread_.join();
  closed_ = false;
  failed_ = false;
  failure_.clear();
  queue_.clear();
  filename_.clear();  // TF's EventsWriter makes a new file for the next event
  next_flush_time_ = 0;
  start_thread();
}

bool EventWriter::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

std::string EventWriter::filename() const {
  std::lock_guard<std::mutex> lock(mu_);
  return filename_;
}

void EventWriter::run() {
  try {
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        queued_.wait(lock, [&] { return front_ready(); });
        item = std::move(queue_.front());
        queue_.pop_front();
        dequeued_.notify_all();
        if (item.kind == Kind::kPending) {
          if (item.pending->state == PendingRecord::State::kDropped) continue;
          item.kind = Kind::kEvent;
          item.bytes = std::move(item.pending->bytes);
        }
      }
      if (item.kind == Kind::kStop) {
        close_file();
        return;
      }
      if (item.kind == Kind::kFlush) {
        flush_file();
        std::lock_guard<std::mutex> lock(mu_);
        flush_done_ = item.flush_id;
        flushed_.notify_all();
        continue;
      }
      write(item.bytes);
      const double now = now_seconds();
      if (now > next_flush_time_) {
        flush_file();
        next_flush_time_ = now + flush_secs_;
      }
    }
  } catch (const EventWriterError& e) {
    fail(e);
  } catch (const std::exception& e) {
    fail(EventWriterError(e.what()));
  }
}

void EventWriter::fail(const EventWriterError& error) {
  // As TF's thread: it logs the error and ends, waiting callers wake, the
  // failure is kept for the next caller, and the file is closed.
  if (failures_.report) {
    try {
      failures_.report(error.what());
    } catch (...) {
      // The failure itself is what the next caller learns.
    }
  }
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  failed_ = true;
  failure_ = error.what();
  failure_kind_ = error.kind();
  queue_.clear();
  dequeued_.notify_all();
  flushed_.notify_all();
}

void EventWriter::write(const std::string& event) {
  if (file_ == nullptr) {
    std::string name;
    {
      std::lock_guard<std::mutex> lock(mu_);
      name = filename_;
    }
    if (name.empty()) {
      std::optional<std::string> made = create_file_();
      // As TF's EventsWriter: the event is dropped, the next one tries again.
      if (!made) return;
      name = std::move(*made);
      std::lock_guard<std::mutex> lock(mu_);
      filename_ = name;
    }
    file_ = std::fopen(name.c_str(), "ab");
    if (file_ == nullptr) throw EventWriterError(os_error("Could not open events file", name));
  }
  const std::string record = tfrecord(event);
  // As TF's EventsWriter, a failed append shows in the next flush.
  std::fwrite(record.data(), 1, record.size(), file_);
  ++outstanding_;
}

void EventWriter::flush_file() {
  if (outstanding_ == 0 || file_ == nullptr) return;
  // As TF's EventsWriter: the buffered records written out, then synced.
  // A file deleted meanwhile is not looked for: TF says nothing of it
  // either, and goes on writing to the deleted file.
  const char* failed_to = nullptr;
  if (std::fflush(file_) != 0)
    failed_to = "flush";
  else if (::fsync(::fileno(file_)) != 0)
    failed_to = "sync";
  if (failed_to == nullptr) {
    outstanding_ = 0;
    return;
  }
  const int err = errno;
  std::clearerr(file_);
  if (!failures_.raised) return;  // the records stay outstanding, as in TF
  const std::string name = filename();
  throw file_error(name, err,
                   std::string("Failed to ") + failed_to + " " + std::to_string(outstanding_) +
                       " events to " + name);
}

void EventWriter::close_file() {
  if (file_ == nullptr) return;
  flush_file();
  std::FILE* file = file_;
  file_ = nullptr;
  if (std::fclose(file) != 0 && failures_.raised) throw file_error(filename(), errno, "");
}

}  // namespace fastmts
