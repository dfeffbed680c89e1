// The wall clock of the native timers, as TF's SecondOrStepTimer sees it.
//
// TF's timer calls `time.time()` through basic_session_run_hooks' `time`
// global, so a test or a user that patches `time.time` (or that global)
// moves TF's timers. The native timers follow the same lookup: while it
// still finds the builtin, they read the OS clock with no Python involved;
// once it finds something else, they call that, with the GIL, as TF would.
#pragma once

namespace fastmts {

// Makes every native timer read the clock above. Call with the GIL held,
// once, after TF's basic_session_run_hooks is importable.
void follow_python_time();

// Looks up the clock now, for timers that will run without the GIL (a native
// loop's entry calls it). The GIL must be held.
void notice_python_time();

}  // namespace fastmts
