#include "event_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "event_file.h"

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

}  // namespace

EventWriter::EventWriter(std::string filename, size_t max_queue, double flush_secs,
                         double next_flush_time, CreateFile create_file)
    : max_queue_(max_queue),
      flush_secs_(flush_secs),
      create_file_(std::move(create_file)),
      filename_(std::move(filename)),
      next_flush_time_(next_flush_time) {
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

void EventWriter::throw_if_failed() const {
  if (failed_) throw EventWriterError(failure_);
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
  // flushes it); a failure closes the writer and is raised once more.
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
        queued_.wait(lock, [&] { return !queue_.empty(); });
        item = std::move(queue_.front());
        queue_.pop_front();
        dequeued_.notify_all();
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
  } catch (const std::exception& e) {
    // As TF's thread: it ends, waiting callers wake, the failure is kept
    // for the next caller, and the file is closed.
    if (file_ != nullptr) std::fclose(file_);
    file_ = nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    failed_ = true;
    failure_ = e.what();
    queue_.clear();
    dequeued_.notify_all();
    flushed_.notify_all();
  }
}

void EventWriter::write(const std::string& event) {
  if (file_ == nullptr) {
    std::string name;
    {
      std::lock_guard<std::mutex> lock(mu_);
      name = filename_;
    }
    if (name.empty()) {
      name = create_file_();
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
  const std::string name = filename();
  if (std::fflush(file_) != 0 || std::ferror(file_) != 0 || ::fsync(::fileno(file_)) != 0)
    throw EventWriterError(os_error("Failed to flush " + std::to_string(outstanding_) +
                                        " events to",
                                    name));
  // A file deleted meanwhile is not looked for: TF's EventsWriter says
  // nothing of it either (1.15 returns a status Python drops; 2.x does not
  // check) and goes on writing to the deleted file.
  outstanding_ = 0;
}

void EventWriter::close_file() {
  if (file_ == nullptr) return;
  flush_file();
  std::FILE* file = file_;
  file_ = nullptr;
  if (std::fclose(file) != 0)
    throw EventWriterError(os_error("Error when closing previous event file:", filename()));
}

}  // namespace fastmts
