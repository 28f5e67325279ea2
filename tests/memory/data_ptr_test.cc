// DataPtr: the owning handle runs its deleter exactly once, with the context, pointer and size it
// was given, whether it is destroyed, reset, moved over or swapped.
#include "memory/data_ptr.h"

#include <gtest/gtest.h>

#include <utility>

namespace weft {
namespace {

// What the deleter saw.
struct DeleterLog {
  int calls = 0;
  void* last_ptr = nullptr;
  size_t last_size = 0;
};

void log_deleter(void* context, void* ptr, size_t size) noexcept {
  auto* log = static_cast<DeleterLog*>(context);
  ++log->calls;
  log->last_ptr = ptr;
  log->last_size = size;
}

TEST(DataPtrTest, DefaultHandleIsEmpty) {
  DataPtr empty;
  EXPECT_FALSE(empty);
  EXPECT_EQ(empty.get(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.device(), Device::cpu());
  empty.reset();  // harmless
}

TEST(DataPtrTest, DestructionRunsTheDeleterOnceWithItsArguments) {
  DeleterLog log;
  int storage = 0;
  {
    DataPtr p(&storage, 4, Device::cuda(1), &log, &log_deleter);
    EXPECT_TRUE(p);
    EXPECT_EQ(p.get(), &storage);
    EXPECT_EQ(p.size(), 4u);
    EXPECT_EQ(p.device(), Device::cuda(1));
    EXPECT_EQ(p.context(), &log);
    EXPECT_EQ(log.calls, 0);
  }
  EXPECT_EQ(log.calls, 1);
  EXPECT_EQ(log.last_ptr, &storage);
  EXPECT_EQ(log.last_size, 4u);
}

TEST(DataPtrTest, ResetRunsTheDeleterOnceAndEmptiesTheHandle) {
  DeleterLog log;
  int storage = 0;
  DataPtr p(&storage, 4, Device::cpu(), &log, &log_deleter);
  p.reset();
  EXPECT_EQ(log.calls, 1);
  EXPECT_FALSE(p);
  EXPECT_EQ(p.size(), 0u);
  p.reset();
  EXPECT_EQ(log.calls, 1);
}

TEST(DataPtrTest, MovingTransfersOwnershipWithoutFreeing) {
  DeleterLog log;
  int storage = 0;
  DataPtr a(&storage, 4, Device::cpu(), &log, &log_deleter);
  DataPtr b(std::move(a));
  EXPECT_EQ(log.calls, 0);
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from handles are empty
  EXPECT_EQ(b.get(), &storage);
  DataPtr c;
  c = std::move(b);
  EXPECT_EQ(log.calls, 0);
  EXPECT_EQ(c.get(), &storage);
  c.reset();
  EXPECT_EQ(log.calls, 1);
}

TEST(DataPtrTest, MoveAssigningOverAHandleFreesWhatItHeld) {
  DeleterLog first_log;
  DeleterLog second_log;
  int first = 0;
  int second = 0;
  DataPtr a(&first, 4, Device::cpu(), &first_log, &log_deleter);
  DataPtr b(&second, 8, Device::cpu(), &second_log, &log_deleter);
  a = std::move(b);
  EXPECT_EQ(first_log.calls, 1);
  EXPECT_EQ(first_log.last_ptr, &first);
  EXPECT_EQ(second_log.calls, 0);
  EXPECT_EQ(a.get(), &second);
  DataPtr& same = a;
  a = std::move(same);  // a self-move keeps the memory
  EXPECT_EQ(second_log.calls, 0);
  EXPECT_EQ(a.get(), &second);
}

TEST(DataPtrTest, SwapExchangesOwnership) {
  DeleterLog first_log;
  DeleterLog second_log;
  int first = 0;
  int second = 0;
  {
    DataPtr a(&first, 4, Device::cpu(), &first_log, &log_deleter);
    DataPtr b(&second, 8, Device::cuda(0), &second_log, &log_deleter);
    a.swap(b);
    EXPECT_EQ(a.get(), &second);
    EXPECT_EQ(a.size(), 8u);
    EXPECT_EQ(a.device(), Device::cuda(0));
    EXPECT_EQ(b.get(), &first);
    b.reset();
    EXPECT_EQ(first_log.calls, 1);
    EXPECT_EQ(second_log.calls, 0);
  }
  EXPECT_EQ(second_log.calls, 1);
  EXPECT_EQ(second_log.last_size, 8u);
}

}  // namespace
}  // namespace weft
