#include "server/termination_signal.h"

#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <thread>

#include <spdlog/spdlog.h>

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
    spdlog::warn("signal {} during the drain: exiting now", signal_number);
    spdlog::default_logger()->flush();
    std::_Exit(128 + signal_number);
  }).detach();
}

}  // namespace rtgen
