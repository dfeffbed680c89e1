#include "core/queue_runner.h"

#include <algorithm>

#include "core/native_threads.h"
#include "core/tf_status.h"

namespace fastmts {

namespace {
// Ends a thread's life in its own flag and the count; both were set alive
// before the thread started, so a thread is never seen alive but uncounted.
class AliveScope {
 public:
  explicit AliveScope(std::atomic<bool>* flag) : flag_(flag) {}
  ~AliveScope() {
    flag_->store(false, std::memory_order_release);
    note_native_thread_ended();
  }

 private:
  std::atomic<bool>* flag_;
};

RunRequest target_only(TF_Operation* op) {
  auto plan = std::make_shared<RunPlan>();
  plan->targets.push_back(op);
  RunRequest request;
  request.plan = std::move(plan);
  return request;
}
}  // namespace

QueueRunnerThreads::QueueRunnerThreads(TF_Session* session, QueueRunnerSpec spec,
                                       std::shared_ptr<Coordinator> coordinator)
    : session_(session),
      spec_(std::move(spec)),
      coordinator_(std::move(coordinator)),
      runs_(static_cast<int>(spec_.enqueue_ops.size())) {
  const size_t n = spec_.enqueue_ops.size() + (spec_.cancel_op ? 1 : 0);
  for (size_t i = 0; i < n; ++i) {
    alive_.push_back(std::make_unique<std::atomic<bool>>(true));
    note_native_thread_started();
    names_.push_back(i < spec_.thread_names.size() ? spec_.thread_names[i] : std::string());
  }
  for (size_t i = 0; i < spec_.enqueue_ops.size(); ++i) {
    TF_Operation* op = spec_.enqueue_ops[i];
    std::atomic<bool>* flag = alive_[i].get();
    threads_.emplace_back([this, op, flag] {
      AliveScope alive(flag);
      run_enqueue(op);
    });
  }
  if (spec_.cancel_op) {
    std::atomic<bool>* flag = alive_.back().get();
    threads_.emplace_back([this, flag] {
      AliveScope alive(flag);
      close_on_stop();
    });
  }
}

QueueRunnerThreads::~QueueRunnerThreads() {
  coordinator_->request_stop();
  join();
}

void QueueRunnerThreads::join() {
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

bool QueueRunnerThreads::is_closed_code(int code) const {
  return std::find(spec_.queue_closed_codes.begin(), spec_.queue_closed_codes.end(), code) !=
         spec_.queue_closed_codes.end();
}

void QueueRunnerThreads::run_quietly(TF_Operation* op) {
  if (!op) return;
  try {
    session_.run(target_only(op));
  } catch (const std::exception&) {
    // As TF's QueueRunner: errors of the close and cancel ops are ignored.
  }
}

void QueueRunnerThreads::run_enqueue(TF_Operation* op) {
  const RunRequest enqueue = target_only(op);
  bool decremented = false;
  try {
    while (!coordinator_->should_stop()) {
      try {
        session_.run(enqueue);
      } catch (const TFError& e) {
        if (!is_closed_code(e.code())) throw;
        // The queue was closed: the last thread to see it runs the close op.
        std::lock_guard<std::mutex> lock(mu_);
        decremented = true;
        if (--runs_ == 0) run_quietly(spec_.close_op);
        return;
      }
    }
  } catch (const TFError& e) {
    coordinator_->report_error(e.code(), e.what());
  } catch (const std::exception& e) {
    coordinator_->report_error(TF_INTERNAL, e.what());
  }
  if (!decremented) {
    std::lock_guard<std::mutex> lock(mu_);
    --runs_;
  }
}

void QueueRunnerThreads::close_on_stop() {
  coordinator_->wait_for_stop();
  run_quietly(spec_.cancel_op);
}

}  // namespace fastmts
