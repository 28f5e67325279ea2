// The object pool's per-thread caches and remote frees, against a plain set of live pointers: no
// object is handed out twice while alive, also when threads free objects of other threads'
// caches and exit with frees still batched (Note [Remote batches at thread exit]).
#include "engine/object_pool.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

namespace weft::detail {
namespace {

struct Item {
  int value = 0;
};
using Pool = ObjectPool<Item>;

// Objects created on a thread of their own, so that they belong to that thread's cache (which is
// parked when the thread exits and adopted by the next thread that needs one).
std::vector<Item*> make_on_new_thread(int n) {
  std::vector<Item*> made;
  std::thread([&] {
    for (int i = 0; i < n; ++i) made.push_back(Pool::create());
  }).join();
  return made;
}

// Two sets of objects of two different caches: made on two threads alive at the same time.
std::pair<std::vector<Item*>, std::vector<Item*>> make_on_two_caches(int n) {
  std::vector<Item*> a, b;
  std::thread ta([&] {
    for (int i = 0; i < n; ++i) a.push_back(Pool::create());
  });
  std::thread tb([&] {
    for (int i = 0; i < n; ++i) b.push_back(Pool::create());
  });
  ta.join();
  tb.join();
  return {a, b};
}

// Destroys the objects given to it when its thread's thread_local destructors run: as a cache
// of arrays does when it hands its variables back at thread exit. Constructed before the
// thread's first remote free, so it is destroyed after the pool's own exit flush.
struct DestroyAtThreadExit {
  std::vector<Item*> items;
  ~DestroyAtThreadExit() {
    for (Item* item : items) Pool::destroy(item);
  }
};

// Creates `n` objects on each of four threads alive at once (so that they adopt the caches parked
// by earlier threads, whichever they are) and checks that every object is distinct from the
// others and from `alive` (objects still in use elsewhere).
void expect_distinct(int n, const std::set<Item*>& alive) {
  constexpr int kThreads = 4;
  std::vector<Item*> made[kThreads];
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&made, n, t] {
      for (int i = 0; i < n; ++i) made[t].push_back(Pool::create());
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<Item*> seen(alive);
  for (const auto& list : made) {
    for (Item* item : list) {
      EXPECT_TRUE(seen.insert(item).second) << "object " << item << " handed out twice";
    }
  }
  for (const auto& list : made) {
    for (Item* item : list) Pool::destroy(item);
  }
}

TEST(ObjectPool, FreesAfterTheExitFlushOfAThreadReachTheirOwnersOnce) {
  for (int round = 0; round < 20; ++round) {
    auto [first, second] = make_on_two_caches(3);  // owned by caches A and B
    std::thread([&] {
      thread_local DestroyAtThreadExit late;
      late.items = second;  // freed to B after the exit flush of the batch for A
      // Remote frees, batched: the batch is still pending when the thread starts to exit.
      for (Item* item : first) Pool::destroy(item);
    }).join();
    // Every object was freed exactly once; creating many must never give one object twice.
    expect_distinct(200, {});
  }
}

TEST(ObjectPool, ObjectsFreedByManyShortLivedThreadsAreNeverHandedOutTwice) {
  std::vector<Item*> keep = make_on_new_thread(200);
  std::set<Item*> alive(keep.begin(), keep.end());
  for (int round = 0; round < 10; ++round) {
    std::vector<Item*> batch = make_on_new_thread(50);
    std::vector<std::thread> freeing;
    for (int t = 0; t < 5; ++t) {
      freeing.emplace_back([&batch, t] {
        for (int i = t * 10; i < (t + 1) * 10; ++i) Pool::destroy(batch[i]);
      });
    }
    for (std::thread& t : freeing) t.join();
    expect_distinct(100, alive);
  }
  for (Item* item : keep) Pool::destroy(item);
}

}  // namespace
}  // namespace weft::detail
