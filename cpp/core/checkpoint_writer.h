// Asynchronous checkpoints: at a save, the step path only takes a snapshot of
// the tensors the Saver's save ops write; a background thread then runs the
// Saver's own save op (SaveV2 shards and their merge) fed with that snapshot,
// so the files are TF's. One write at a time. Knows nothing of Python.
//
// Why a snapshot costs (almost) nothing: a resource variable's read shares
// the variable's buffer, and TF's update kernels copy a buffer that someone
// else still holds before they write to it (copy-on-write). Holding the
// fetched reads therefore keeps the values of that step, and a variable
// costs a copy only if it is updated while its write is in flight. Tensors
// that may be updated in place whoever holds them (a ref variable's buffer)
// are copied at the snapshot instead.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/run_plan.h"

namespace fastmts {

// What one Saver's save op reads and where its filename goes.
struct SavePlan {
  std::vector<TF_Output> saved;    // every save op's tensor inputs
  std::vector<char> copy_at_snapshot;  // per `saved`: 1 unless copy-on-write keeps it
  TF_Output filename;              // the Saver's filename tensor (fed the prefix)
  TF_Operation* save = nullptr;    // the op of the Saver's save tensor
};
using SavePlanPtr = std::shared_ptr<const SavePlan>;

class CheckpointWriter {
 public:
  // Runs on the writer thread once the save op succeeded (Python: the meta
  // graph, the checkpoint state file, older checkpoints deleted). What it
  // throws is the write's error.
  using FinishFn = std::function<void()>;

  CheckpointWriter() = default;
  // Waits for the write in flight.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // On the training thread: waits for the write in flight, takes the
  // snapshot with `runner` (TF errors thrown as TFError, nothing started)
  // and starts writing it to `prefix`. `keep_alive` (the session's owner)
  // and `finish` are released on the writer thread once the write ended.
  // The previous write's outcome must have been taken (std::logic_error).
  // Called from one thread at a time (the training thread).
  void write(const SessionRunner& runner, SavePlanPtr plan, const std::string& prefix,
             std::shared_ptr<void> keep_alive, FinishFn finish);

  // Blocks until no write is in flight (from any thread).
  void wait();
  bool in_flight() const { return in_flight_.load(std::memory_order_acquire); }
  // Whether a write ended whose outcome was not taken yet (one atomic load:
  // the hook polls it every step).
  bool has_outcome() const { return has_outcome_.load(std::memory_order_acquire); }
  // Takes the ended write's outcome, once has_outcome(): rethrows its error,
  // if any. Does nothing otherwise.
  void take_outcome();

 private:
  // Starts the writer thread: the save op fed with `values`, then `finish`.
  void start_thread(TF_Session* session, SavePlanPtr plan, TensorPtr filename,
                    std::vector<SharedTensor> values, std::shared_ptr<void> keep_alive,
                    FinishFn finish);

  std::mutex thread_mu_;  // joining and starting the thread: wait() may come from any thread
  std::thread thread_;
  std::atomic<bool> in_flight_{false};
  std::atomic<bool> has_outcome_{false};
  std::exception_ptr error_;  // written by the writer thread before has_outcome_
};

}  // namespace fastmts
