// The count of fastmts's native threads alive in the process (queue runners,
// checkpoint writers): tests check that none outlives its session.
#pragma once

namespace fastmts {

int live_native_threads();
// Called before a native thread starts (so it is never alive uncounted) and
// as the last thing it does.
void note_native_thread_started();
void note_native_thread_ended();

}  // namespace fastmts
