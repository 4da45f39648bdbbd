#pragma once
// SIGINT/SIGTERM handling without async-signal-unsafe handlers: the signals are blocked in every
// thread and one thread waits for them synchronously.

namespace rtgen {

// Blocks SIGINT and SIGTERM in the calling thread and every thread it creates afterwards.
// Call first in main, before any thread starts.
void BlockTerminationSignals();
// Waits for SIGINT or SIGTERM and returns its number.
int WaitForTerminationSignal();
// Starts a detached thread that waits for one more SIGINT or SIGTERM and then ends the process
// at once with status 128 + its number (the second Ctrl-C during a graceful drain).
void ExitOnNextTerminationSignal();

}  // namespace rtgen
