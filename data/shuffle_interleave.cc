// Dataset::shuffle (a reservoir of `buffer` elements drawn from at random) and
// Dataset::interleave (several inner datasets read in turn, block by block).
#include <atomic>
#include <vector>

#include "data/dataset.h"
#include "data/stage_util.h"

namespace weft::data {

namespace {

using detail::DatasetNode;
using NodePtr = std::shared_ptr<const DatasetNode>;

class ShuffleNode final : public DatasetNode {
 public:
  ShuffleNode(NodePtr input, int64_t buffer, std::optional<uint64_t> seed, bool reshuffle)
      : input_(std::move(input)),
        buffer_(buffer),
        seed_(seed ? *seed : detail::random_seed_from_os()),
        reshuffle_(reshuffle) {
    WEFT_CHECK(buffer_ >= 1) << "shuffle(" << buffer_ << "): the buffer size must be >= 1";
  }
  std::unique_ptr<Iterator> make_iterator(const IterContext& ctx) const override;
  std::string describe() const override {
    return "shuffle(" + std::to_string(buffer_) + ") <- " + input_->describe();
  }
  int64_t cardinality() const override { return input_->cardinality(); }

  NodePtr input_;
  int64_t buffer_;
  uint64_t seed_;  // drawn once when none is given, so passes without reshuffling agree
  bool reshuffle_;
  // Passes started so far (iterate() calls and repeat() passes): pass k shuffles with
  // (seed, k), so each epoch has its own order and a seeded program repeats its orders.
  mutable std::atomic<uint64_t> passes_{0};
};

// Note [Shuffle buffer]: the buffer is filled with the first `buffer` elements; each call draws
// one of the buffered elements uniformly at random and refills its place with the next input
// element. So element i can come out no earlier than position i - buffer + 1, and with a buffer
// at least the dataset's size the order is a uniform random permutation. When reshuffling each
// pass, the generator is seeded from (seed, the enclosing epoch, this node's pass count) — every
// iterate() and every pass of repeat() is a pass, and inner datasets of interleave get an epoch
// of their own — and from the seed alone otherwise.
class ShuffleIterator final : public Iterator {
 public:
  ShuffleIterator(const ShuffleNode& node, const IterContext& ctx)
      : node_(node),
        input_(node.input_->make_iterator(ctx)),
        rng_(node.reshuffle_ ? mix_seed(mix_seed(node.seed_, static_cast<uint64_t>(ctx.epoch)),
                                        node.passes_.fetch_add(1) + 1)
                             : mix_seed(node.seed_, 0),
             0x5348) {}
  std::optional<Element> next() override {
    while (!input_done_ && static_cast<int64_t>(buffer_.size()) < node_.buffer_) {
      std::optional<Element> e = input_->next();  // an input error reaches the caller as is
      if (!e) {
        input_done_ = true;
        break;
      }
      buffer_.push_back(std::move(*e));
    }
    if (buffer_.empty()) return std::nullopt;
    const auto pick = static_cast<size_t>(rng_.uniform_int(0, buffer_.size() - 1));
    Element out = std::move(buffer_[pick]);
    if (pick + 1 != buffer_.size()) buffer_[pick] = std::move(buffer_.back());
    buffer_.pop_back();
    return out;
  }
  void collect_stats(IteratorStats& stats) const override { input_->collect_stats(stats); }

 private:
  const ShuffleNode& node_;
  std::unique_ptr<Iterator> input_;
  Rng rng_;
  std::vector<Element> buffer_;
  bool input_done_ = false;
};

std::unique_ptr<Iterator> ShuffleNode::make_iterator(const IterContext& ctx) const {
  return std::make_unique<ShuffleIterator>(*this, ctx);
}

class InterleaveNode final : public DatasetNode {
 public:
  InterleaveNode(NodePtr input, std::function<Dataset(const Element&)> fn, int64_t cycle,
                 int64_t block)
      : input_(std::move(input)), fn_(std::move(fn)), cycle_(cycle), block_(block) {
    WEFT_CHECK(fn_ != nullptr) << "interleave: no function";
    WEFT_CHECK(cycle_ >= 1 && block_ >= 1) << "interleave(cycle_length " << cycle_
                                           << ", block_length " << block_ << "): both must be >= 1";
  }
  std::unique_ptr<Iterator> make_iterator(const IterContext& ctx) const override;
  std::string describe() const override {
    return "interleave(" + std::to_string(cycle_) + ", " + std::to_string(block_) + ") <- " +
           input_->describe();
  }

  NodePtr input_;
  std::function<Dataset(const Element&)> fn_;
  int64_t cycle_, block_;
  mutable std::atomic<uint64_t> passes_{0};
};

// Note [Interleave order]: slot k of the cycle holds an inner iterator. The current slot gives
// `block` elements, then the cycle moves to the next slot. An empty slot takes the next input
// element's dataset when the cycle reaches it; a slot whose dataset ends is emptied and the
// cycle moves on at once. So with cycle_length 2 and block_length 1 over inputs a (2 elements),
// b (3) and c (4) the order is a0 b0 a1 b1 b2 c0 c1 c2 c3: a ends, b gives its turn's element,
// and c opens in a's slot (tf.data's interleave order).
class InterleaveIterator final : public Iterator {
 public:
  InterleaveIterator(const InterleaveNode& node, const IterContext& ctx)
      : node_(node),
        inner_epoch_(mix_seed(static_cast<uint64_t>(ctx.epoch), node.passes_.fetch_add(1))),
        input_(node.input_->make_iterator(ctx)),
        slots_(node.cycle_) {}
  std::optional<Element> next() override {
    while (!input_done_ || open_ > 0) {
      Slot& slot = slots_[cycle_index_];
      if (slot.it) {
        std::optional<Element> e = slot.it->next();
        if (e) {
          if (++block_index_ == node_.block_) advance();
          return e;
        }
        // The iterator refers to its node: destroy it first (a plain `slot = Slot{}` would free
        // the node before the iterator, as members are assigned in declaration order).
        slot.it.reset();
        slot.node.reset();
        --open_;
        advance();
      } else if (!input_done_) {
        std::optional<Element> e = input_->next();
        if (!e) {
          input_done_ = true;
          continue;
        }
        detail::check_host_arrays(*e, "interleave");
        Dataset inner = make_inner(*e);
        slot.node = inner.node();
        // Each inner dataset is a new node: its own pass counters start at 0, so the pass of
        // this interleave and the input element decide its epoch (files and epochs differ).
        slot.it = slot.node->make_iterator(
            IterContext{static_cast<int64_t>(mix_seed(inner_epoch_, e->index) >> 1)});
        ++open_;
      } else {
        advance();
      }
    }
    return std::nullopt;
  }
  void collect_stats(IteratorStats& stats) const override {
    input_->collect_stats(stats);
    for (const Slot& s : slots_) {
      if (s.it) s.it->collect_stats(stats);
    }
  }

 private:
  struct Slot {
    std::shared_ptr<const DatasetNode> node;  // keeps the inner pipeline alive
    std::unique_ptr<Iterator> it;
  };
  void advance() {
    block_index_ = 0;
    cycle_index_ = (cycle_index_ + 1) % node_.cycle_;
  }
  Dataset make_inner(const Element& e) {
    try {
      return node_.fn_(e);
    } catch (...) {
      detail::rethrow_as_data_error("interleave", e.index, e.origin);
    }
  }

  const InterleaveNode& node_;
  uint64_t inner_epoch_;
  std::unique_ptr<Iterator> input_;
  std::vector<Slot> slots_;
  int64_t cycle_index_ = 0;
  int64_t block_index_ = 0;
  int64_t open_ = 0;
  bool input_done_ = false;
};

std::unique_ptr<Iterator> InterleaveNode::make_iterator(const IterContext& ctx) const {
  return std::make_unique<InterleaveIterator>(*this, ctx);
}

}  // namespace

Dataset Dataset::shuffle(int64_t buffer, std::optional<uint64_t> seed,
                         bool reshuffle_each_iteration) const {
  return Dataset(std::make_shared<ShuffleNode>(node_, buffer, seed, reshuffle_each_iteration));
}

Dataset Dataset::interleave(std::function<Dataset(const Element&)> fn, int64_t cycle_length,
                            int64_t block_length) const {
  return Dataset(
      std::make_shared<InterleaveNode>(node_, std::move(fn), cycle_length, block_length));
}

}  // namespace weft::data
