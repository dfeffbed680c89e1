#include "core/signal_watch.h"

#include <signal.h>

#include <atomic>
#include <mutex>

namespace fastmts {

namespace {

// Read by the handler: lock-free, so safe to touch from a signal handler.
std::atomic<uint64_t> g_deliveries{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

struct Chain {
  struct sigaction previous;  // written before ours is installed, read by it
  int watches = 0;
};
Chain g_chains[NSIG];
std::mutex g_mu;  // guards installing and removing (not the handler)

void on_signal(int sig, siginfo_t* info, void* context) {
  g_deliveries.fetch_add(1, std::memory_order_relaxed);
  const struct sigaction& previous = g_chains[sig].previous;
  if (previous.sa_flags & SA_SIGINFO)
    previous.sa_sigaction(sig, info, context);
  else
    previous.sa_handler(sig);
}

bool has_handler_function(const struct sigaction& action) {
  if (action.sa_flags & SA_SIGINFO) return action.sa_sigaction != nullptr;
  return action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN &&
         action.sa_handler != nullptr;
}

bool is_ours(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) && action.sa_sigaction == &on_signal;
}

}  // namespace

SignalWatch::SignalWatch(const std::vector<int>& signals) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (int sig : signals) {
    if (sig <= 0 || sig >= NSIG) continue;
    Chain& chain = g_chains[sig];
    if (chain.watches == 0) {
      struct sigaction current;
      if (sigaction(sig, nullptr, &current) != 0 || !has_handler_function(current)) continue;
      // A handler that resets itself on delivery would reset ours instead.
      if (current.sa_flags & SA_RESETHAND) continue;
      chain.previous = current;
      struct sigaction mine = current;
      mine.sa_flags |= SA_SIGINFO;
      mine.sa_sigaction = &on_signal;
      if (sigaction(sig, &mine, nullptr) != 0) continue;
    }
    ++chain.watches;
    chained_.push_back(sig);
  }
}

SignalWatch::~SignalWatch() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (int sig : chained_) {
    Chain& chain = g_chains[sig];
    if (--chain.watches > 0) continue;
    struct sigaction current;
    if (sigaction(sig, nullptr, &current) == 0 && is_ours(current))
      sigaction(sig, &chain.previous, nullptr);
  }
}

uint64_t SignalWatch::deliveries() { return g_deliveries.load(std::memory_order_relaxed); }

}  // namespace fastmts
