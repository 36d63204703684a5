// ThreadSanitizer support for Debian's prebuilt Abseil (--config=tsan only).
//
// libabsl_synchronization.so is not built with -fsanitize=thread, so TSan
// cannot see absl::Mutex or absl::CondVar synchronize: every field guarded
// by an absl::Mutex would be reported as a race. This file interposes the
// out-of-line entry points of Mutex and CondVar (the test binary exports
// them, so Abseil's and gRPC's own calls land here too), calls the real
// ones (dlsym RTLD_NEXT) and tells TSan what they do: an unlock releases,
// a lock acquires, a wait does both. It models happens-before only (no
// lock-order checks).
//
// It also carries the suppressions for what TSan cannot see inside Debian's
// other prebuilt libraries (tools/tsan/README.md explains each).
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

#define HUB_STR2(x) #x
#define HUB_STR(x) HUB_STR2(x)

namespace {

// The mangled name of absl::<inline ns>::<rest>, e.g. "5Mutex4LockEv"
// ("_ZNK..." for a const member function).
std::string Mangled(const char* rest, bool is_const = false) {
  const std::string ns = HUB_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  return std::string(is_const ? "_ZNK4absl" : "_ZN4absl") +
         std::to_string(ns.size()) + ns + rest;
}

template <typename F>
F Real(const char* rest, bool is_const = false) {
  const std::string name = Mangled(rest, is_const);
  void* f = dlsym(RTLD_NEXT, name.c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "absl_sync_shim: no %s\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<F>(f);
}

}  // namespace

#define HUB_REAL(type, rest)                 \
  static const auto real = Real<type>(rest); \
  (void)0
#define HUB_REAL_CONST(type, rest)                 \
  static const auto real = Real<type>(rest, true); \
  (void)0

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  HUB_REAL(void (*)(Mutex*), "5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  HUB_REAL(void (*)(Mutex*), "5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

bool Mutex::TryLock() {
  HUB_REAL(bool (*)(Mutex*), "5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  HUB_REAL(bool (*)(Mutex*), "5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::Unlock() {
  HUB_REAL(void (*)(Mutex*), "5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  HUB_REAL(void (*)(Mutex*), "5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::LockWhen(const Condition& cond) {
  HUB_REAL(void (*)(Mutex*, const Condition&),
           "5Mutex8LockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  HUB_REAL(void (*)(Mutex*, const Condition&),
           "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration t) {
  HUB_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
           "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = real(this, cond, t);
  __tsan_acquire(this);
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time t) {
  HUB_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
           "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const bool met = real(this, cond, t);
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, absl::Duration t) {
  HUB_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
           "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = real(this, cond, t);
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, absl::Time t) {
  HUB_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
           "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const bool met = real(this, cond, t);
  __tsan_acquire(this);
  return met;
}

void Mutex::Await(const Condition& cond) {
  HUB_REAL(void (*)(Mutex*, const Condition&),
           "5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration t) {
  HUB_REAL(bool (*)(Mutex*, const Condition&, absl::Duration),
           "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  const bool met = real(this, cond, t);
  __tsan_acquire(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time t) {
  HUB_REAL(bool (*)(Mutex*, const Condition&, absl::Time),
           "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  const bool met = real(this, cond, t);
  __tsan_acquire(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  HUB_REAL(void (*)(CondVar*, Mutex*), "7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration t) {
  HUB_REAL(bool (*)(CondVar*, Mutex*, absl::Duration),
           "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, t);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time t) {
  HUB_REAL(bool (*)(CondVar*, Mutex*, absl::Time),
           "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  const bool timed_out = real(this, mu, t);
  __tsan_acquire(mu);
  return timed_out;
}

// Notification: a waiter that finds it already notified returns on an
// atomic load inside Abseil, without taking the mutex, so the Mutex entry
// points above never see that acquire.
void Notification::Notify() {
  HUB_REAL(void (*)(Notification*), "12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  HUB_REAL_CONST(void (*)(const Notification*),
                 "12Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration t) const {
  HUB_REAL_CONST(
      bool (*)(const Notification*, absl::Duration),
      "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  const bool notified = real(this, t);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time t) const {
  HUB_REAL_CONST(bool (*)(const Notification*, absl::Time),
                 "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const bool notified = real(this, t);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

ABSL_NAMESPACE_END
}  // namespace absl

// Read by TSan at start-up. Each entry is explained in tools/tsan/README.md.
extern "C" const char* __tsan_default_suppressions() {
  return
      // Abseil's deadlock detector (on in tests) keeps its lock graph under
      // an internal base_internal::SpinLock that TSan cannot see; only the
      // graph's own memmoves are reported. Ignores calls made from that
      // library only, never hub code.
      "called_from_lib:libabsl_graphcycles_internal.so\n";
}

extern "C" const char* __tsan_default_options() {
  return "halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=0";
}
