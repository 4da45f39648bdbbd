#include "server/termination_signal.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace rtgen {
namespace {

sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Waits for SIGINT or SIGTERM and returns its number.
int WaitForTerminationSignal() {
  const sigset_t set = TerminationSignals();
  int signal_number = 0;
  while (sigwait(&set, &signal_number) != 0) {
  }
  return signal_number;
}

// What the watcher thread and main share (the state lives for the whole process).
struct WatchState {
  std::mutex mu;
  std::condition_variable drain_asked;
  bool serving = false;
  int drain_signal = 0;  // 0: none yet
};

WatchState& State() {
  static WatchState* state = new WatchState();  // never destroyed: the thread may outlive main
  return *state;
}

[[noreturn]] void ExitNow(int signal_number, const char* why) {
  // Straight to stderr, not through spdlog: this may run while exit() tears the logger down.
  [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, why, std::strlen(why));
  std::_Exit(128 + signal_number);
}

}  // namespace

void BlockTerminationSignals() {
  const sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void WatchTerminationSignals() {
  std::thread([] {
    WatchState& state = State();
    while (true) {
      const int signal_number = WaitForTerminationSignal();
      std::lock_guard<std::mutex> lock(state.mu);
      if (!state.serving) {
        ExitNow(signal_number, "termination signal before serving (loading): exiting now\n");
      }
      if (state.drain_signal != 0) {
        ExitNow(signal_number, "second termination signal during the drain: exiting now\n");
      }
      state.drain_signal = signal_number;
      state.drain_asked.notify_all();
    }
  }).detach();
}

int WaitForDrainSignal() {
  WatchState& state = State();
  std::unique_lock<std::mutex> lock(state.mu);
  state.serving = true;
  state.drain_asked.wait(lock, [&] { return state.drain_signal != 0; });
  return state.drain_signal;
}

}  // namespace rtgen
