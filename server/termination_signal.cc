#include "server/termination_signal.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
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

}  // namespace

void BlockTerminationSignals() {
  const sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal() {
  const sigset_t set = TerminationSignals();
  int signal_number = 0;
  while (sigwait(&set, &signal_number) != 0) {
  }
  return signal_number;
}

void ExitOnNextTerminationSignal() {
  std::thread([] {
    const int signal_number = WaitForTerminationSignal();
    // Straight to stderr, not through spdlog: this may run while exit() tears the logger down.
    const char message[] = "second termination signal during the drain: exiting now\n";
    [[maybe_unused]] const ssize_t written = write(STDERR_FILENO, message, sizeof(message) - 1);
    std::_Exit(128 + signal_number);
  }).detach();
}

}  // namespace rtgen
