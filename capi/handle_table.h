// Generation-checked tables behind the C ABI's opaque handles (Note [Generation-checked handles]).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "base/error.h"

namespace weft::capi {

// Note [Generation-checked handles]
// A weft_array_t, weft_graph_t or weft_executor_t is not the address of its object but a token
// the size of a pointer: bits 0-23 are a slot of the kind's HandleTable, bits 24-31 the kind,
// bits 32-63 the slot's generation when the handle was made. Freeing a handle advances its
// slot's generation and may hand the slot out again, so a freed handle (used or freed again),
// a handle of another kind and a pointer that is no handle at all are all refused with an error
// naming the handle; nothing but the table is read to decide, and slots are never deallocated
// (chunks of kChunkSize slots, made as needed and kept for the process's life), so the check
// reads no freed memory whatever the caller passes. A slot whose 32-bit generation would wrap
// is retired instead of reused, so a token never becomes live again.
//
// Cost: a lookup is a few loads (chunk pointer, slot state twice, object pointer), no lock; a
// handle is made or freed under the table's mutex. The public types stay opaque pointers, so
// callers see no change (a C program never dereferences them).
//
// Freeing a handle while another thread still uses it is the caller's race, as freeing memory
// in use is: the lookup then may or may not see the free. Sequential use after free is always
// an error.

/// The kinds of handle, stored in bits 24-31 of every token.
enum class HandleKind : uint8_t { kArray = 0xA1, kGraph = 0xA2, kExecutor = 0xA3 };

/// "array", "graph", "executor" or nullptr for a byte that is no kind.
inline const char* handle_kind_name(uint8_t kind) {
  switch (static_cast<HandleKind>(kind)) {
    case HandleKind::kArray:
      return "array";
    case HandleKind::kGraph:
      return "graph";
    case HandleKind::kExecutor:
      return "executor";
  }
  return nullptr;
}

/// A table of live objects of one kind, addressed by generation-checked tokens. Thread-safe;
/// constant-initialisable and trivially destructible, so it can be used during static
/// destruction. Owns the objects it holds.
template <typename T>
class HandleTable {
 public:
  static constexpr int kIndexBits = 24;
  static constexpr uint32_t kChunkBits = 12;
  static constexpr uint32_t kChunkSize = uint32_t{1} << kChunkBits;
  static constexpr uint32_t kMaxSlots = uint32_t{1} << kIndexBits;
  static constexpr uint32_t kMaxChunks = kMaxSlots / kChunkSize;

  constexpr HandleTable(HandleKind kind, const char* name) : kind_(kind), name_(name) {}
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  /// Takes ownership of `object` and returns its token (never 0). OutOfMemory when kMaxSlots
  /// handles of this kind are live.
  uint64_t insert(std::unique_ptr<T> object) {
    std::lock_guard<std::mutex> lock(mutex_);
    uint32_t index = free_head_;
    if (index != kNoSlot) {
      free_head_ = slot(index).next_free;
    } else {
      WEFT_CHECK_AS(OutOfMemory, next_unused_ < kMaxSlots)
          << "too many live weft " << name_ << " handles (" << kMaxSlots << "); free some first";
      index = next_unused_++;
      const uint32_t c = index >> kChunkBits;
      if (chunks_[c].load(std::memory_order_relaxed) == nullptr) {
        // Release: a lookup that sees the chunk (acquire) sees its initialised slots.
        chunks_[c].store(new Slot[kChunkSize], std::memory_order_release);
      }
    }
    Slot& s = slot(index);
    const uint64_t generation = s.state.load(std::memory_order_relaxed) >> 1;
    // Release, both: a lookup that reads this object, or this state, sees the object whole.
    s.object.store(object.release(), std::memory_order_release);
    s.state.store((generation << 1) | 1, std::memory_order_release);
    return (generation << 32) | (uint64_t{static_cast<uint8_t>(kind_)} << kIndexBits) | index;
  }

  /// The object of a live `token`, or nullptr (freed, another kind, not a token).
  T* find(uint64_t token) const noexcept {
    const Slot* s = slot_of(token);
    if (s == nullptr) return nullptr;
    const uint64_t live = ((token >> 32) << 1) | 1;
    // Acquire: pairs with insert's release stores (object complete before it is seen live).
    if (s->state.load(std::memory_order_acquire) != live) return nullptr;
    T* object = s->object.load(std::memory_order_acquire);
    // A second look catches a free (and reuse) between the two loads; the acquire load of the
    // object above orders it before this one.
    if (s->state.load(std::memory_order_relaxed) != live) return nullptr;
    return object;
  }

  /// Removes a live `token`'s object and returns it (the caller destroys it, outside the lock);
  /// nullptr when the token is not live (freed already, another kind, not a token).
  std::unique_ptr<T> erase(uint64_t token) {
    std::lock_guard<std::mutex> lock(mutex_);
    Slot* s = const_cast<Slot*>(slot_of(token));
    if (s == nullptr) return nullptr;
    const uint64_t generation = token >> 32;
    uint64_t expected = (generation << 1) | 1;
    const uint64_t next = generation + 1;
    // acq_rel: a concurrent lookup that still sees the old state has seen the object whole;
    // one that sees the new state refuses the token.
    if (!s->state.compare_exchange_strong(expected, (next & 0xffffffffu) << 1,
                                          std::memory_order_acq_rel)) {
      return nullptr;
    }
    std::unique_ptr<T> object(s->object.exchange(nullptr, std::memory_order_acq_rel));
    if (next <= 0xffffffffu) {  // a slot whose generation would wrap is retired
      s->next_free = free_head_;
      free_head_ = static_cast<uint32_t>(token & (kMaxSlots - 1));
    }
    return object;
  }

  /// Why `token` is not live, for messages: "it was freed", "it is a weft graph handle", ...
  std::string why_not_live(uint64_t token) const {
    const auto kind = static_cast<uint8_t>(token >> kIndexBits);
    if (kind != static_cast<uint8_t>(kind_)) {
      const char* other = handle_kind_name(kind);
      return other ? std::string("it is a weft ") + other + " handle"
                   : std::string("it was not made by weft (or was corrupted)");
    }
    const Slot* s = slot_of(token);
    const uint64_t generation = token >> 32;
    const uint64_t current = s ? s->state.load(std::memory_order_acquire) >> 1 : 0;
    if (s == nullptr || generation == 0 || generation > current)
      return "it was not made by weft (or was corrupted)";
    return "it was freed (a handle is freed once, and cannot be used after)";
  }

  /// The token as 18 characters of hex ("0x" and 16 digits), as a debugger shows the handle.
  static std::string token_text(uint64_t token) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(token));
    return buf;
  }

 private:
  static constexpr uint32_t kNoSlot = 0xffffffffu;
  struct Slot {
    /// (generation << 1) | live; generations start at 1, so no token is 0.
    std::atomic<uint64_t> state{2};
    std::atomic<T*> object{nullptr};
    uint32_t next_free = kNoSlot;  ///< the free list, under mutex_
  };

  Slot& slot(uint32_t index) {
    return chunks_[index >> kChunkBits].load(std::memory_order_relaxed)[index & (kChunkSize - 1)];
  }
  const Slot* slot_of(uint64_t token) const noexcept {
    if (static_cast<uint8_t>(token >> kIndexBits) != static_cast<uint8_t>(kind_)) return nullptr;
    const auto index = static_cast<uint32_t>(token & (kMaxSlots - 1));
    // Acquire: pairs with the release store that published the chunk.
    const Slot* chunk = chunks_[index >> kChunkBits].load(std::memory_order_acquire);
    return chunk ? &chunk[index & (kChunkSize - 1)] : nullptr;
  }

  const HandleKind kind_;
  const char* const name_;
  std::mutex mutex_;
  uint32_t free_head_ = kNoSlot;  ///< under mutex_
  uint32_t next_unused_ = 0;      ///< under mutex_
  std::atomic<Slot*> chunks_[kMaxChunks] = {};
};

}  // namespace weft::capi
