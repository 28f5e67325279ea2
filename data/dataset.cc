// Dataset: the value type, the in-memory sources (arrays, range, generator) and the simple
// ordering transforms (filter, take, skip, shard, repeat, ignore_errors).
#include "data/dataset.h"

#include <cstring>
#include <random>
#include <sstream>

#include "data/stage_util.h"
#include "ndarray/runtime.h"

namespace weft::data {

namespace detail {

std::string describe_element(int64_t index, const std::string& origin) {
  std::ostringstream os;
  os << "element " << index;
  if (!origin.empty()) os << " (" << origin << ")";
  return os.str();
}

void rethrow_stored(std::exception_ptr error, const std::string& stage, int64_t index,
                    const std::string& origin) {
  try {
    std::rethrow_exception(error);
  } catch (...) {
    rethrow_as_data_error(stage, index, origin);
  }
}

void rethrow_as_data_error(const std::string& stage, int64_t index, const std::string& origin) {
  try {
    throw;
  } catch (const DataError&) {
    throw;
  } catch (const PipelineInterrupt&) {
    throw;
  } catch (const std::exception& e) {
    throw DataError(stage + " on " + describe_element(index, origin) + ": " + e.what(), index,
                    origin);
  } catch (...) {
    throw DataError(stage + " on " + describe_element(index, origin) + ": unknown exception", index,
                    origin);
  }
}

void check_host_arrays(const Element& element, const std::string& stage) {
  for (size_t i = 0; i < element.arrays.size(); ++i) {
    const NDArray& a = element.arrays[i];
    if (a.is_none() || a.device().type != DeviceType::kCPU) {
      throw DataError(stage + ": array " + std::to_string(i) + " of " +
                          describe_element(element.index, element.origin) +
                          (a.is_none() ? " is none" : " is not on the CPU"),
                      element.index, element.origin);
    }
    try {
      a.wait_to_read();
    } catch (...) {
      rethrow_as_data_error(stage, element.index, element.origin);
    }
  }
}

NDArray copy_host(const NDArray& src) {
  src.wait_to_read();
  NDArray dst = NDArray::empty(src.shape(), src.dtype(), Device::cpu());
  if (src.nbytes() > 0) std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
  return dst;
}

uint64_t random_seed_from_os() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

int64_t DatasetNode::cardinality() const { return kUnknownCardinality; }

}  // namespace detail

using detail::DatasetNode;

Dataset::Dataset(std::shared_ptr<const DatasetNode> node) : node_(std::move(node)) {
  WEFT_CHECK(node_ != nullptr) << "Dataset: null node";
}

namespace {

// The iterator iterate() returns: keeps the pipeline's nodes alive (stage iterators refer to
// their nodes) for as long as the iteration runs, even when the Dataset was a temporary.
class RootIterator final : public Iterator {
 public:
  RootIterator(std::shared_ptr<const DatasetNode> node)
      : node_(std::move(node)), it_(node_->make_iterator(IterContext{})) {}
  std::optional<Element> next() override {
    auto e = it_->next();
    if (e) ++elements_;
    return e;
  }
  void collect_stats(IteratorStats& stats) const override {
    stats.elements += elements_;
    it_->collect_stats(stats);
  }

 private:
  std::shared_ptr<const DatasetNode> node_;
  std::unique_ptr<Iterator> it_;  // destroyed before node_
  int64_t elements_ = 0;
};

}  // namespace

std::unique_ptr<Iterator> Dataset::iterate() const { return std::make_unique<RootIterator>(node_); }

namespace {

using NodePtr = std::shared_ptr<const DatasetNode>;

// ---- from_arrays ------------------------------------------------------------------------------

class ArraysNode final : public DatasetNode {
 public:
  ArraysNode(std::vector<NDArray> arrays, std::string name)
      : arrays_(std::move(arrays)), name_(std::move(name)) {
    WEFT_CHECK(!arrays_.empty()) << "from_arrays(" << name_ << "): no arrays";
    for (size_t i = 0; i < arrays_.size(); ++i) {
      const NDArray& a = arrays_[i];
      WEFT_CHECK(!a.is_none()) << "from_arrays(" << name_ << "): array " << i << " is none";
      WEFT_CHECK(a.ndim() >= 1) << "from_arrays(" << name_ << "): array " << i
                                << " is 0-d; rows are taken along the first axis";
      WEFT_CHECK(a.shape()[0] == arrays_[0].shape()[0])
          << "from_arrays(" << name_ << "): array " << i << " has " << a.shape()[0]
          << " rows but array 0 has " << arrays_[0].shape()[0];
    }
  }
  std::unique_ptr<Iterator> make_iterator(const IterContext&) const override;
  std::string describe() const override { return "from_arrays(" + name_ + ")"; }
  int64_t cardinality() const override { return arrays_[0].shape()[0]; }

 private:
  friend class ArraysIterator;
  std::vector<NDArray> arrays_;
  std::string name_;
};

class ArraysIterator final : public Iterator {
 public:
  explicit ArraysIterator(const ArraysNode& node) : node_(node) {
    host_.reserve(node.arrays_.size());
    for (const NDArray& a : node.arrays_) {
      // Rows are read directly, so the arrays must be on the CPU with their writes done.
      host_.push_back(a.device().type == DeviceType::kCPU ? a : a.copy_to(Device::cpu()));
      host_.back().wait_to_read();
    }
  }
  std::optional<Element> next() override {
    if (row_ >= node_.cardinality()) return std::nullopt;
    Element e;
    e.index = row_;
    e.origin = node_.name_ + " row " + std::to_string(row_);
    for (const NDArray& a : host_) {
      Shape row_shape(a.shape().begin() + 1, a.shape().end());
      NDArray r = NDArray::empty(row_shape, a.dtype(), Device::cpu());
      const size_t bytes = r.nbytes();
      if (bytes > 0) {
        std::memcpy(r.raw_data(), static_cast<const char*>(a.raw_data()) + row_ * bytes, bytes);
      }
      e.arrays.push_back(std::move(r));
    }
    ++row_;
    return e;
  }

 private:
  const ArraysNode& node_;
  std::vector<NDArray> host_;
  int64_t row_ = 0;
};

std::unique_ptr<Iterator> ArraysNode::make_iterator(const IterContext&) const {
  return std::make_unique<ArraysIterator>(*this);
}

// ---- range ------------------------------------------------------------------------------------

class RangeNode final : public DatasetNode {
 public:
  RangeNode(int64_t start, int64_t stop, int64_t step) : start_(start), stop_(stop), step_(step) {
    WEFT_CHECK(step != 0) << "range(" << start << ", " << stop << ", 0): step must not be 0";
  }
  std::unique_ptr<Iterator> make_iterator(const IterContext&) const override {
    class It final : public Iterator {
     public:
      explicit It(const RangeNode& n) : n_(n), value_(n.start_) {}
      std::optional<Element> next() override {
        if (n_.step_ > 0 ? value_ >= n_.stop_ : value_ <= n_.stop_) return std::nullopt;
        Element e;
        e.index = (value_ - n_.start_) / n_.step_;
        e.origin = "range value " + std::to_string(value_);
        NDArray v = NDArray::empty(Shape(std::vector<int64_t>{}), DType::kInt64, Device::cpu());
        *static_cast<int64_t*>(v.raw_data()) = value_;
        e.arrays.push_back(std::move(v));
        value_ += n_.step_;
        return e;
      }

     private:
      const RangeNode& n_;
      int64_t value_;
    };
    return std::make_unique<It>(*this);
  }
  std::string describe() const override {
    return "range(" + std::to_string(start_) + ", " + std::to_string(stop_) + ", " +
           std::to_string(step_) + ")";
  }
  int64_t cardinality() const override {
    const int64_t span = step_ > 0 ? stop_ - start_ : start_ - stop_;
    const int64_t step = step_ > 0 ? step_ : -step_;
    return span <= 0 ? 0 : (span + step - 1) / step;
  }

 private:
  int64_t start_, stop_, step_;
};

// ---- from_generator ---------------------------------------------------------------------------

class GeneratorNode final : public DatasetNode {
 public:
  GeneratorNode(std::function<GeneratorFn()> make, std::string name)
      : make_(std::move(make)), name_(std::move(name)) {
    WEFT_CHECK(make_ != nullptr) << "from_generator(" << name_ << "): no function";
  }
  std::unique_ptr<Iterator> make_iterator(const IterContext&) const override {
    class It final : public Iterator {
     public:
      It(GeneratorFn gen, const std::string& name) : gen_(std::move(gen)), name_(name) {}
      std::optional<Element> next() override {
        if (done_) return std::nullopt;
        const int64_t index = count_++;
        const std::string origin = name_ + " item " + std::to_string(index);
        std::optional<std::vector<NDArray>> arrays;
        try {
          arrays = gen_();
        } catch (...) {
          detail::rethrow_as_data_error("from_generator(" + name_ + ")", index, origin);
        }
        if (!arrays) {
          done_ = true;
          return std::nullopt;
        }
        Element e{std::move(*arrays), index, origin};
        detail::check_host_arrays(e, "from_generator(" + name_ + ")");
        return e;
      }

     private:
      GeneratorFn gen_;
      std::string name_;
      int64_t count_ = 0;
      bool done_ = false;
    };
    GeneratorFn gen = make_();
    WEFT_CHECK(gen != nullptr) << "from_generator(" << name_ << "): made no generator";
    return std::make_unique<It>(std::move(gen), name_);
  }
  std::string describe() const override { return "from_generator(" + name_ + ")"; }

 private:
  std::function<GeneratorFn()> make_;
  std::string name_;
};

// ---- transforms with one input ----------------------------------------------------------------

// A node with one input dataset.
class UnaryNode : public DatasetNode {
 public:
  explicit UnaryNode(NodePtr input) : input_(std::move(input)) {}

 protected:
  NodePtr input_;
};

// An iterator over one input; forwards statistics.
class UnaryIterator : public Iterator {
 public:
  explicit UnaryIterator(std::unique_ptr<Iterator> input) : input_(std::move(input)) {}
  void collect_stats(IteratorStats& stats) const override {
    if (input_) input_->collect_stats(stats);
  }

 protected:
  std::unique_ptr<Iterator> input_;
};

class FilterNode final : public UnaryNode {
 public:
  FilterNode(NodePtr input, FilterFn pred, std::string name)
      : UnaryNode(std::move(input)), pred_(std::move(pred)), name_(std::move(name)) {
    WEFT_CHECK(pred_ != nullptr) << "filter(" << name_ << "): no predicate";
  }
  std::unique_ptr<Iterator> make_iterator(const IterContext& ctx) const override {
    class It final : public UnaryIterator {
     public:
      It(std::unique_ptr<Iterator> in, const FilterNode& n) : UnaryIterator(std::move(in)), n_(n) {}
      std::optional<Element> next() override {
        while (auto e = input_->next()) {
          detail::check_host_arrays(*e, "filter(" + n_.name_ + ")");
          bool keep = false;
          try {
            keep = n_.pred_(e->arrays);
          } catch (...) {
            detail::rethrow_as_data_error("filter(" + n_.name_ + ")", e->index, e->origin);
          }
          if (keep) return e;
        }
        return std::nullopt;
      }

     private:
      const FilterNode& n_;
    };
    return std::make_unique<It>(input_->make_iterator(ctx), *this);
  }
  std::string describe() const override { return "filter(" + name_ + ") <- " + input_->describe(); }

 private:
  FilterFn pred_;
  std::string name_;
};

// take(n), skip(n) and shard(num, index) select input positions; an input error at a position
// that is not selected is dropped with its element.
class SelectNode final : public UnaryNode {
 public:
  enum class Kind { kTake, kSkip, kShard };
  SelectNode(NodePtr input, Kind kind, int64_t a, int64_t b)
      : UnaryNode(std::move(input)), kind_(kind), a_(a), b_(b) {}
  std::unique_ptr<Iterator> make_iterator(const IterContext& ctx) const override {
    class It final : public UnaryIterator {
     public:
      It(std::unique_ptr<Iterator> in, const SelectNode& n) : UnaryIterator(std::move(in)), n_(n) {}
      std::optional<Element> next() override {
        for (;;) {
          if (n_.kind_ == Kind::kTake && n_.a_ >= 0 && position_ >= n_.a_) return std::nullopt;
          const int64_t position = position_++;
          const bool selected = n_.kind_ == Kind::kTake   ? true
                                : n_.kind_ == Kind::kSkip ? position >= n_.a_
                                                          : position % n_.a_ == n_.b_;
          if (selected) return input_->next();
          try {
            if (!input_->next()) return std::nullopt;
          } catch (const DataError&) {
            // Not this stage's element: dropped with it.
          }
        }
      }

     private:
      const SelectNode& n_;
      int64_t position_ = 0;
    };
    return std::make_unique<It>(input_->make_iterator(ctx), *this);
  }
  std::string describe() const override {
    const std::string what = kind_ == Kind::kTake ? "take(" + std::to_string(a_) + ")"
                             : kind_ == Kind::kSkip
                                 ? "skip(" + std::to_string(a_) + ")"
                                 : "shard(" + std::to_string(a_) + ", " + std::to_string(b_) + ")";
    return what + " <- " + input_->describe();
  }
  int64_t cardinality() const override {
    const int64_t n = input_->cardinality();
    if (n == kUnknownCardinality) return n;
    if (kind_ == Kind::kTake) {
      if (a_ < 0) return n;
      return n == kInfiniteCardinality ? a_ : std::min(n, a_);
    }
    if (n == kInfiniteCardinality) return n;
    if (kind_ == Kind::kSkip) return std::max<int64_t>(0, n - a_);
    return n > b_ ? (n - b_ + a_ - 1) / a_ : 0;
  }

 private:
  Kind kind_;
  int64_t a_, b_;
};

class RepeatNode final : public UnaryNode {
 public:
  RepeatNode(NodePtr input, int64_t count) : UnaryNode(std::move(input)), count_(count) {}
  std::unique_ptr<Iterator> make_iterator(const IterContext& ctx) const override {
    class It final : public UnaryIterator {
     public:
      It(const RepeatNode& n, IterContext ctx) : UnaryIterator(nullptr), n_(n), ctx_(ctx) {}
      std::optional<Element> next() override {
        for (;;) {
          if (n_.count_ >= 0 && pass_ >= n_.count_) return std::nullopt;
          if (!input_) {
            // Pass 0 keeps the caller's epoch, so repeat(k)'s first pass equals the input alone.
            IterContext c{pass_ == 0 ? ctx_.epoch
                                     : static_cast<int64_t>(mix_seed(ctx_.epoch, pass_) >> 1)};
            input_ = n_.input_->make_iterator(c);
            produced_in_pass_ = 0;
          }
          std::optional<Element> e;
          try {
            e = input_->next();
          } catch (const DataError&) {
            ++produced_in_pass_;  // a failed element still shows the input is not empty
            throw;
          }
          if (e) {
            ++produced_in_pass_;
            return e;
          }
          input_.reset();
          ++pass_;
          // An empty input would make repeat() loop forever; it ends instead.
          if (produced_in_pass_ == 0) return std::nullopt;
        }
      }

     private:
      const RepeatNode& n_;
      IterContext ctx_;
      int64_t pass_ = 0;
      int64_t produced_in_pass_ = 0;
    };
    return std::make_unique<It>(*this, ctx);
  }
  std::string describe() const override {
    return "repeat(" + std::to_string(count_) + ") <- " + input_->describe();
  }
  int64_t cardinality() const override {
    const int64_t n = input_->cardinality();
    if (n == 0 || count_ == 0) return 0;
    if (count_ < 0) return n == kUnknownCardinality ? n : kInfiniteCardinality;
    if (n < 0) return n;
    return n * count_;
  }

 private:
  int64_t count_;
};

class IgnoreErrorsNode final : public UnaryNode {
 public:
  using UnaryNode::UnaryNode;
  std::unique_ptr<Iterator> make_iterator(const IterContext& ctx) const override {
    class It final : public UnaryIterator {
     public:
      using UnaryIterator::UnaryIterator;
      std::optional<Element> next() override {
        for (;;) {
          try {
            return input_->next();
          } catch (const DataError&) {
            ++skipped_;
          }
        }
      }
      void collect_stats(IteratorStats& stats) const override {
        stats.skipped_errors += skipped_;
        UnaryIterator::collect_stats(stats);
      }

     private:
      int64_t skipped_ = 0;
    };
    return std::make_unique<It>(input_->make_iterator(ctx));
  }
  std::string describe() const override { return "ignore_errors <- " + input_->describe(); }
};

}  // namespace

Dataset from_arrays(std::vector<NDArray> arrays, std::string name) {
  return Dataset(std::make_shared<ArraysNode>(std::move(arrays), std::move(name)));
}
Dataset range(int64_t start, int64_t stop, int64_t step) {
  return Dataset(std::make_shared<RangeNode>(start, stop, step));
}
Dataset from_generator(std::function<GeneratorFn()> make_generator, std::string name) {
  return Dataset(std::make_shared<GeneratorNode>(std::move(make_generator), std::move(name)));
}

Dataset Dataset::filter(FilterFn pred, std::string name) const {
  return Dataset(std::make_shared<FilterNode>(node_, std::move(pred), std::move(name)));
}
Dataset Dataset::take(int64_t n) const {
  return Dataset(std::make_shared<SelectNode>(node_, SelectNode::Kind::kTake, n, 0));
}
Dataset Dataset::skip(int64_t n) const {
  WEFT_CHECK(n >= 0) << "skip(" << n << "): the count must be >= 0";
  return Dataset(std::make_shared<SelectNode>(node_, SelectNode::Kind::kSkip, n, 0));
}
Dataset Dataset::shard(int64_t num, int64_t index) const {
  WEFT_CHECK(num >= 1 && index >= 0 && index < num)
      << "shard(" << num << ", " << index << "): needs num >= 1 and 0 <= index < num";
  return Dataset(std::make_shared<SelectNode>(node_, SelectNode::Kind::kShard, num, index));
}
Dataset Dataset::repeat(int64_t count) const {
  return Dataset(std::make_shared<RepeatNode>(node_, count));
}
Dataset Dataset::ignore_errors() const {
  return Dataset(std::make_shared<IgnoreErrorsNode>(node_));
}

}  // namespace weft::data
