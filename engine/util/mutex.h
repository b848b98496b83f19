// Mutexes that clang's thread-safety analysis (-Wthread-safety) understands, over the std::
// ones. The analysis checks ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations only
// against capability types, and libstdc++'s std::mutex, std::shared_mutex and their guards
// carry no annotations; absl::Mutex does, but Debian's Abseil is not built for ThreadSanitizer,
// so the engine keeps std::mutex and std::shared_mutex underneath (TSan intercepts them) and
// wraps them here in annotated types: Mutex, SharedMutex, the scoped guards MutexLock (of a
// Mutex), WriterLock and ReaderLock (of a SharedMutex), and CondVar (std::condition_variable,
// waiting on a MutexLock's std::unique_lock, so a wait is the standard one). Everything is
// inline: the same code as the std:: types. The `fuzz` preset's clang build checks the
// annotations (docs/architecture.md, "Synchronisation").
//
// The guards hold a std::unique_lock / std::shared_lock, so they can let go and take the lock
// again inside their scope (Unlock/Lock: relockable scoped capabilities), start unlocked
// (std::defer_lock, then Lock or TryLock) and be waited on. A function that needs a lock held
// says so with ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) (or ABSL_SHARED_LOCKS_REQUIRED), not by taking
// a guard; one that waits on a CondVar takes the caller's MutexLock& as well.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "absl/base/thread_annotations.h"

namespace ember::util {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds the mutex (checks nothing at run time).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

 private:
  friend class MutexLock;
  std::mutex mu_;
};

class ABSL_LOCKABLE SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  void LockShared() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void UnlockShared() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }
  bool TryLockShared() ABSL_SHARED_TRYLOCK_FUNCTION(true) { return mu_.try_lock_shared(); }
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}
  void AssertSharedHeld() const ABSL_ASSERT_SHARED_LOCK() {}

 private:
  friend class WriterLock;
  friend class ReaderLock;
  std::shared_mutex mu_;
};

// Holds `mu` from construction (or, with std::defer_lock, from a successful Lock/TryLock) to
// the end of the scope, less where Unlock lets it go until Lock.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : lock_(mu.mu_) {}
  MutexLock(Mutex& mu, std::defer_lock_t) ABSL_LOCKS_EXCLUDED(mu)
      : lock_(mu.mu_, std::defer_lock) {}
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { lock_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { lock_.unlock(); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return lock_.try_lock(); }

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

// MutexLock's exclusive counterpart for a SharedMutex.
class ABSL_SCOPED_LOCKABLE WriterLock {
 public:
  explicit WriterLock(SharedMutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : lock_(mu.mu_) {}
  WriterLock(SharedMutex& mu, std::defer_lock_t) ABSL_LOCKS_EXCLUDED(mu)
      : lock_(mu.mu_, std::defer_lock) {}
  ~WriterLock() ABSL_UNLOCK_FUNCTION() {}
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { lock_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { lock_.unlock(); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return lock_.try_lock(); }

 private:
  std::unique_lock<std::shared_mutex> lock_;
};

// MutexLock's shared counterpart for a SharedMutex.
class ABSL_SCOPED_LOCKABLE ReaderLock {
 public:
  explicit ReaderLock(SharedMutex& mu) ABSL_SHARED_LOCK_FUNCTION(mu) : lock_(mu.mu_) {}
  ReaderLock(SharedMutex& mu, std::defer_lock_t) ABSL_LOCKS_EXCLUDED(mu)
      : lock_(mu.mu_, std::defer_lock) {}
  ~ReaderLock() ABSL_UNLOCK_FUNCTION() {}
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

  void Lock() ABSL_SHARED_LOCK_FUNCTION() { lock_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { lock_.unlock(); }
  bool TryLock() ABSL_SHARED_TRYLOCK_FUNCTION(true) { return lock_.try_lock(); }

 private:
  std::shared_lock<std::shared_mutex> lock_;
};

// A std::condition_variable waited on through a MutexLock (which must hold its mutex). The
// analysis takes the mutex as held throughout a wait, as the caller sees it; a predicate that
// reads guarded fields says so: [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; }.
class CondVar {
 public:
  void Wait(MutexLock& lock) { cv_.wait(lock.lock_); }
  template <typename Pred>
  void Wait(MutexLock& lock, Pred pred) {
    cv_.wait(lock.lock_, std::move(pred));
  }
  template <typename Rep, typename Period>
  std::cv_status WaitFor(MutexLock& lock, const std::chrono::duration<Rep, Period>& d) {
    return cv_.wait_for(lock.lock_, d);
  }
  // Whether `pred` holds (false: the time ran out first).
  template <typename Rep, typename Period, typename Pred>
  bool WaitFor(MutexLock& lock, const std::chrono::duration<Rep, Period>& d, Pred pred) {
    return cv_.wait_for(lock.lock_, d, std::move(pred));
  }
  template <typename Clock, typename Duration>
  std::cv_status WaitUntil(MutexLock& lock, const std::chrono::time_point<Clock, Duration>& t) {
    return cv_.wait_until(lock.lock_, t);
  }
  void NotifyOne() noexcept { cv_.notify_one(); }
  void NotifyAll() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace ember::util
