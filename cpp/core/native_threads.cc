#include "core/native_threads.h"

#include <atomic>

namespace fastmts {
namespace {
std::atomic<int> g_live_threads{0};
}  // namespace

int live_native_threads() { return g_live_threads.load(); }
void note_native_thread_started() { ++g_live_threads; }
void note_native_thread_ended() { --g_live_threads; }

}  // namespace fastmts
