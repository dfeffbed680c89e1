// TF's QueueRunner under a Coordinator, in native threads that never hold
// the GIL: one thread per enqueue op runs it until the coordinator stops;
// when an enqueue fails because its queue closed, the last such thread runs
// the close op; any other error goes to the coordinator; one more thread
// waits for stop and runs the cancel op (which unblocks pending enqueues).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/coordinator.h"
#include "core/run_plan.h"

namespace fastmts {

struct QueueRunnerSpec {
  // One name per enqueue thread, then the close-on-stop thread's (TF's
  // names: QueueRunnerThread-<queue>-<op> and ...-close_on_stop).
  std::vector<std::string> thread_names;
  std::vector<TF_Operation*> enqueue_ops;
  TF_Operation* close_op = nullptr;
  TF_Operation* cancel_op = nullptr;
  std::vector<int> queue_closed_codes;     // TF error codes meaning "closed"
};

class QueueRunnerThreads {
 public:
  // Starts the threads. The session must stay open until they are joined.
  QueueRunnerThreads(TF_Session* session, QueueRunnerSpec spec,
                     std::shared_ptr<Coordinator> coordinator);
  // Requests stop and joins (threads blocked in TF must have been released,
  // by the cancel op or by closing the session).
  ~QueueRunnerThreads();
  QueueRunnerThreads(const QueueRunnerThreads&) = delete;
  QueueRunnerThreads& operator=(const QueueRunnerThreads&) = delete;

  size_t size() const { return threads_.size(); }
  const std::string& name(size_t i) const { return names_.at(i); }
  bool alive(size_t i) const { return alive_.at(i)->load(std::memory_order_acquire); }
  void join();  // joins every thread (blocks)

 private:
  void run_enqueue(TF_Operation* op);
  void close_on_stop();
  void run_quietly(TF_Operation* op);  // errors ignored, as TF does for close/cancel
  bool is_closed_code(int code) const;

  SessionRunner session_;
  QueueRunnerSpec spec_;
  std::shared_ptr<Coordinator> coordinator_;
  std::mutex mu_;
  int runs_;  // enqueue threads still running (guarded by mu_)
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<std::atomic<bool>>> alive_;
  std::vector<std::thread> threads_;
};

}  // namespace fastmts
