// Thread-caching object pool for the engine's hot-path objects (operation blocks, variables).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define WEFT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_ASAN 1
#endif
#endif
#ifdef WEFT_ASAN
#include <sanitizer/asan_interface.h>
#define WEFT_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define WEFT_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define WEFT_POISON(p, n) ((void)(p), (void)(n))
#define WEFT_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace weft::detail {

// Note [Object pool ownership]
// Each thread allocates from its own cache without atomics. An object freed by the thread that
// owns its cache goes straight back to the local free list; one freed by another thread (an
// operation pushed by the caller and completed by a worker) is pushed onto the owner's
// lock-free "remote" stack (gathered per freeing thread and pushed with one CAS per 32 objects),
// and the owner takes the whole stack back with one
// exchange when its local list runs dry. Taking the whole stack avoids ABA. Caches are never
// destroyed: when a thread exits its cache is parked and the next new thread adopts it, so
// memory stays bounded however many engines (and worker threads) come and go. Freed objects are
// poisoned for AddressSanitizer so a use after free through the pool is still reported.
//
// Note [Slot stamps]: each slot carries a 64-bit stamp beside (not inside) the object. Because
// chunks are never freed and the stamp is never poisoned, any pointer the pool ever handed out
// may have its stamp read or compared-and-swapped at any time, also after the object was
// destroyed and its slot reused by another object. The pool itself never changes a stamp; the
// engine uses it as the generation of a variable (Note [Variable generations]) and as the
// exactly-once completion token of an operation (Note [Completion tokens]). Stamps only grow.
template <typename T>
class ObjectPool {
 public:
  template <typename... Args>
  static T* create(Args&&... args) {
    Slot* slot = local().pop();
    WEFT_UNPOISON(slot->storage, sizeof(T));
    return ::new (static_cast<void*>(slot->storage)) T(std::forward<Args>(args)...);
  }

  /// The stamp of the slot that holds (or held) `object`: any pointer ever returned by create().
  /// Note [Slot stamps].
  static std::atomic<uint64_t>& stamp(const T* object) { return slot_of(object)->stamp; }

  static void destroy(T* object) {
    object->~T();
    Slot* slot = slot_of(object);
    WEFT_POISON(slot->storage, sizeof(T));
    Cache* owner = slot->owner;
    Cache* mine = tls_cache_;
    if (owner == mine) {
      slot->next = owner->local_free;
      owner->local_free = slot;
      return;
    }
    // Objects of another thread's cache are gathered into a short chain and handed back with one
    // CAS per kBatch objects, not one per object (each CAS moves the owner's cache line here).
    // Note [Remote batches at thread exit].
    RemoteBatch& batch = tls_batch_;
    if (batch.owner != owner) {
      flush(batch);
      batch.owner = owner;
    }
    slot->next = batch.first;
    if (batch.first == nullptr) batch.last = slot;
    batch.first = slot;
    if (++batch.count >= kBatch || (batch.count == 1 && !arm_batch_flusher())) flush(batch);
  }

 private:
  struct Cache;
  struct Slot {
    Cache* owner = nullptr;
    Slot* next = nullptr;
    std::atomic<uint64_t> stamp{0};  // Note [Slot stamps]
    alignas(alignof(T) > alignof(std::max_align_t)
                ? alignof(T)
                : alignof(std::max_align_t)) unsigned char storage[sizeof(T)];
  };
  static constexpr size_t kBatch = 32;  // remote frees handed back per CAS

  static Slot* slot_of(const T* object) {
    return reinterpret_cast<Slot*>(
        const_cast<unsigned char*>(reinterpret_cast<const unsigned char*>(object)) -
        offsetof(Slot, storage));
  }

  struct Cache {
    Slot* local_free = nullptr;
    std::atomic<Slot*> remote_free{nullptr};
    size_t next_chunk = 64;

    Slot* pop() {
      if (local_free == nullptr) {
        // acquire: pairs with the release CAS of remote frees.
        local_free = remote_free.exchange(nullptr, std::memory_order_acquire);
        if (local_free == nullptr) grow();
      }
      Slot* slot = local_free;
      local_free = slot->next;
      return slot;
    }

    void grow() {
      size_t count = next_chunk;
      if (next_chunk < 16384) next_chunk *= 2;
      // Chunks are never freed (see the note above); they stay reachable from the cache, which
      // is reachable from the leaked registry.
      Slot* chunk =
          static_cast<Slot*>(::operator new(count * sizeof(Slot), std::align_val_t(alignof(Slot))));
      for (size_t i = 0; i < count; ++i) {
        Slot* slot = ::new (static_cast<void*>(&chunk[i])) Slot;
        slot->owner = this;
        slot->next = local_free;
        WEFT_POISON(slot->storage, sizeof(T));
        local_free = slot;
      }
      chunks.push_back(chunk);
    }
    std::vector<Slot*> chunks;
  };

  // Note [Remote batches at thread exit]
  // A thread's batch of remote frees must reach the owners when the thread exits, and frees made
  // after that (by thread_local destructors that run later: a cache of arrays handing its
  // variables back) must still reach them. So the batch itself is trivially destructible (its
  // fields stay valid through the whole teardown), and a separate thread_local flusher, armed by
  // the thread's first remote free, flushes it at exit and marks the thread as exiting; from then
  // on every remote free is handed back at once. (A batch whose own destructor flushed it was
  // flushed again by a later free to another owner: the destructor's reset of the fields is a
  // dead store to an object whose lifetime ends, which the compiler may drop, and the second
  // flush pushed the same chain twice, looping the owner's free list.)
  struct RemoteBatch {
    Cache* owner = nullptr;
    Slot* first = nullptr;
    Slot* last = nullptr;
    size_t count = 0;
  };
  struct BatchFlusher {
    ~BatchFlusher() {
      tls_exiting_ = true;
      flush(tls_batch_);
    }
  };
  /// Arms the thread's exit flush; false once the thread is exiting (flush every free at once).
  static bool arm_batch_flusher() {
    if (tls_exiting_) return false;
    thread_local BatchFlusher flusher;
    static_cast<void>(flusher);
    return true;
  }

  static void flush(RemoteBatch& batch) {
    if (batch.first != nullptr) {
      Cache* owner = batch.owner;
      Slot* head = owner->remote_free.load(std::memory_order_relaxed);
      do {
        batch.last->next = head;
        // release: the owner's acquire exchange sees our writes to these slots (and, through
        // the engine's own ordering, everything the objects' last users did).
      } while (!owner->remote_free.compare_exchange_weak(
          head, batch.first, std::memory_order_release, std::memory_order_relaxed));
    }
    batch.first = batch.last = nullptr;
    batch.count = 0;
  }

  struct Registry {
    std::mutex mutex;
    std::vector<Cache*> parked;
  };
  static Registry& registry() {
    static Registry* registry = new Registry();  // leaked: outlives every thread's cache
    return *registry;
  }

  // Parks the thread's cache at thread exit.
  struct Holder {
    Cache* cache = nullptr;
    ~Holder() {
      if (cache == nullptr) return;
      tls_cache_ = nullptr;
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mutex);
      r.parked.push_back(cache);
    }
  };

  static Cache& local() {
    if (tls_cache_ != nullptr) return *tls_cache_;
    return adopt();
  }

  static Cache& adopt() {
    thread_local Holder holder;
    Cache* cache = nullptr;
    {
      Registry& r = registry();
      std::lock_guard<std::mutex> lock(r.mutex);
      if (!r.parked.empty()) {
        cache = r.parked.back();
        r.parked.pop_back();
      }
    }
    if (cache == nullptr) cache = new Cache();
    holder.cache = cache;
    tls_cache_ = cache;
    return *cache;
  }

  static inline thread_local Cache* tls_cache_ = nullptr;
  static inline thread_local RemoteBatch tls_batch_;  // trivially destructible: see the note
  static inline thread_local bool tls_exiting_ = false;
};

}  // namespace weft::detail
