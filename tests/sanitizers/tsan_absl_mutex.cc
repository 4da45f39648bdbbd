// ThreadSanitizer builds only (linked into the test binaries by tests/sanitizers/CMakeLists.txt).
// Debian's abseil is not built with -fsanitize=thread, so TSan cannot see absl::Mutex lock and
// unlock (uninstrumented atomics and futex waits) and reports every access that a Mutex
// protects as a data race — false positives in our own code. This file interposes the Mutex and
// CondVar entry points that the shared library exports: each calls the real one (looked up with
// dlsym(RTLD_NEXT)) and tells TSan about the acquire/release on the mutex's address, which is
// what an instrumented abseil does itself. Races TSan finds after that are real.

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#define RTGEN_STR2(x) #x
#define RTGEN_STR(x) RTGEN_STR2(x)

namespace {

// Itanium mangling of absl::<inline namespace>::`rest` (e.g. "5Mutex4LockEv"); `prefix` is
// "_ZNK" for const member functions.
template <typename Fn>
Fn Real(const char* rest, const char* prefix = "_ZN") {
  const std::string ns = RTGEN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = std::string(prefix) + "4absl" + std::to_string(ns.size()) + ns + rest;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_absl_mutex: %s not found\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

using MutexFn = void (*)(Mutex*);
using MutexTryFn = bool (*)(Mutex*);
using MutexCondFn = void (*)(Mutex*, const Condition&);

void Mutex::Lock() {
  static const MutexFn real = Real<MutexFn>("5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}
void Mutex::Unlock() {
  static const MutexFn real = Real<MutexFn>("5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}
bool Mutex::TryLock() {
  static const MutexTryFn real = Real<MutexTryFn>("5Mutex7TryLockEv");
  bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}
void Mutex::ReaderLock() {
  static const MutexFn real = Real<MutexFn>("5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}
void Mutex::ReaderUnlock() {
  static const MutexFn real = Real<MutexFn>("5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}
bool Mutex::ReaderTryLock() {
  static const MutexTryFn real = Real<MutexTryFn>("5Mutex13ReaderTryLockEv");
  bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}
void Mutex::LockWhen(const Condition& cond) {
  static const MutexCondFn real = Real<MutexCondFn>("5Mutex8LockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}
void Mutex::Await(const Condition& cond) {  // releases and re-acquires the mutex
  static const MutexCondFn real = Real<MutexCondFn>("5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  real(this, cond);
  __tsan_acquire(this);
}

void CondVar::Wait(Mutex* mu) {
  using Fn = void (*)(CondVar*, Mutex*);
  static const Fn real = Real<Fn>("7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}
bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  using Fn = bool (*)(CondVar*, Mutex*, Duration);
  static const Fn real = Real<Fn>("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}
bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  using Fn = bool (*)(CondVar*, Mutex*, Time);
  static const Fn real = Real<Fn>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

// Notification: Notify publishes everything before it to whoever returns from a wait.
void Notification::Notify() {
  using Fn = void (*)(Notification*);
  static const Fn real = Real<Fn>("12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}
void Notification::WaitForNotification() const {
  using Fn = void (*)(const Notification*);
  static const Fn real = Real<Fn>("12Notification19WaitForNotificationEv", "_ZNK");
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}
bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  using Fn = bool (*)(const Notification*, Duration);
  static const Fn real =
      Real<Fn>("12Notification30WaitForNotificationWithTimeoutENS0_8DurationE", "_ZNK");
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}
bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  using Fn = bool (*)(const Notification*, Time);
  static const Fn real =
      Real<Fn>("12Notification31WaitForNotificationWithDeadlineENS0_4TimeE", "_ZNK");
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl
