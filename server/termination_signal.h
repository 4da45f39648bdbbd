#pragma once
// SIGINT/SIGTERM handling without async-signal-unsafe handlers: the signals are blocked in every
// thread and one thread waits for them synchronously.

namespace rtgen {

// Blocks SIGINT and SIGTERM in the calling thread and every thread it creates afterwards.
// Call first in main, before any thread starts.
void BlockTerminationSignals();
// Starts the one thread that waits for SIGINT and SIGTERM from now on (call after
// BlockTerminationSignals, before loading the model). Until WaitForDrainSignal is called, a
// signal ends the process at once with status 128 + its number: loading and graph capture can
// take minutes and have nothing to drain. After it, the first signal starts the drain and a
// second one ends the process at once (the second Ctrl-C during a graceful drain).
void WatchTerminationSignals();
// Marks the server as serving and blocks until a signal asks for the drain; returns its number.
int WaitForDrainSignal();

}  // namespace rtgen
