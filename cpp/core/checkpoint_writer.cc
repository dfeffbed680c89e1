#include "core/checkpoint_writer.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stdexcept>
#include <utility>

#include "core/native_threads.h"
#include "core/tf_strings.h"

namespace fastmts {
namespace {
// Linux niceness of a writer thread (per thread on Linux; 0 is the default).
constexpr int kWriterNiceness = 10;
}  // namespace

CheckpointWriter::~CheckpointWriter() { wait(); }

void CheckpointWriter::wait() {
  std::lock_guard<std::mutex> lock(thread_mu_);
  if (thread_.joinable()) thread_.join();
}

void CheckpointWriter::take_outcome() {
  if (!has_outcome_.exchange(false, std::memory_order_acq_rel)) return;
  wait();  // the thread is past its last use of anything but its own count
  std::exception_ptr error = std::move(error_);
  error_ = nullptr;
  if (error) std::rethrow_exception(error);
}

void CheckpointWriter::write(const SessionRunner& runner, SavePlanPtr plan,
                             const std::string& prefix, std::shared_ptr<void> keep_alive,
                             FinishFn finish) {
  wait();
  if (has_outcome())
    throw std::logic_error("fastmts: the previous checkpoint write's outcome was not taken");

  // The snapshot: one run fetching what the save ops would read now.
  static const std::vector<TF_Output> kNoInputs;
  static const std::vector<TF_Tensor*> kNoValues;
  static const std::vector<TF_Operation*> kNoTargets;
  RunResult snapshot;
  runner.run(kNoInputs, kNoValues, plan->saved, kNoTargets, std::string(), false, &snapshot,
             &plan->copy_at_snapshot);

  TensorPtr filename = tensor_from_strings({}, {prefix});
  TF_Session* session = runner.session();
  std::lock_guard<std::mutex> lock(thread_mu_);  // joined by wait() above
  in_flight_.store(true, std::memory_order_release);
  note_native_thread_started();
  try {
    start_thread(session, std::move(plan), std::move(filename), std::move(snapshot.outputs),
                 std::move(keep_alive), std::move(finish));
  } catch (...) {  // no thread (std::system_error): nothing is in flight
    in_flight_.store(false, std::memory_order_release);
    note_native_thread_ended();
    throw;
  }
}

void CheckpointWriter::start_thread(TF_Session* session, SavePlanPtr plan, TensorPtr filename,
                                    std::vector<SharedTensor> values,
                                    std::shared_ptr<void> keep_alive, FinishFn finish) {
  thread_ = std::thread([this, session, plan = std::move(plan), filename = std::move(filename),
                         values = std::move(values), keep_alive = std::move(keep_alive),
                         finish = std::move(finish)]() mutable {
    // Below the training threads' priority: the write has until the next
    // save to finish, the steps have none to spare.
#ifdef __linux__  // niceness is per thread there
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kWriterNiceness);
#endif
    std::exception_ptr error;
    try {
      std::vector<TF_Output> inputs{plan->filename};
      inputs.insert(inputs.end(), plan->saved.begin(), plan->saved.end());
      std::vector<TF_Tensor*> input_values{filename.get()};
      for (const SharedTensor& v : values) input_values.push_back(v.get());
      static const std::vector<TF_Output> kNoFetches;
      RunResult unused;
      // The save ops run on this thread, not in the session's inter-op
      // pool: a write of many MB would hold one of its (few) threads for
      // the whole write, and the training steps would lose it meanwhile.
      SessionRunner(session).run(inputs, input_values, kNoFetches, {plan->save},
                                 kRunInCallerThread, false, &unused);
      values.clear();  // the snapshot's memory goes before the bookkeeping
      finish();
    } catch (...) {
      error = std::current_exception();
    }
    // Released here, on this thread (their owners take the GIL themselves).
    values.clear();
    finish = nullptr;
    keep_alive.reset();
    error_ = std::move(error);
    has_outcome_.store(true, std::memory_order_release);
    in_flight_.store(false, std::memory_order_release);
    note_native_thread_ended();
  });
}

}  // namespace fastmts
