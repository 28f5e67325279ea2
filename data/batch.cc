// Dataset::batch and padded_batch: consecutive elements stacked along a new first axis, rows
// copied by engine operations when the batch is large.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <sstream>

#include "data/dataset.h"
#include "data/stage_util.h"
#include "ndarray/runtime.h"

namespace weft::data {

namespace {

using detail::DatasetNode;
using NodePtr = std::shared_ptr<const DatasetNode>;

// Below this many bytes a batch is copied on the calling thread: an engine hop costs more.
constexpr size_t kParallelCopyBytes = size_t{1} << 20;

std::string shape_text(const Shape& s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

// Writes `value` converted to `dtype` into `count` elements at `dst`.
void fill_value(void* dst, int64_t count, DType dtype, double value) {
  if (count <= 0) return;
  const size_t size = dtype_size(dtype);
  alignas(8) unsigned char pattern[16] = {};
  switch (dtype) {
    case DType::kFloat32:
      *reinterpret_cast<float*>(pattern) = static_cast<float>(value);
      break;
    case DType::kFloat64:
      *reinterpret_cast<double*>(pattern) = value;
      break;
    case DType::kUInt8:
      *pattern = static_cast<uint8_t>(value);
      break;
    case DType::kInt8:
      *reinterpret_cast<int8_t*>(pattern) = static_cast<int8_t>(value);
      break;
    case DType::kInt32:
      *reinterpret_cast<int32_t*>(pattern) = static_cast<int32_t>(value);
      break;
    case DType::kInt64:
      *reinterpret_cast<int64_t*>(pattern) = static_cast<int64_t>(value);
      break;
    case DType::kBool:
      *pattern = value != 0;
      break;
    default:
      WEFT_CHECK(value == 0) << "padded_batch: padding_value " << value << " for dtype "
                             << dtype_name(dtype) << " is not supported (only 0)";
  }
  bool zero = true;
  for (size_t i = 0; i < size; ++i) zero &= pattern[i] == 0;
  if (zero) {
    std::memset(dst, 0, static_cast<size_t>(count) * size);
    return;
  }
  auto* out = static_cast<unsigned char*>(dst);
  for (int64_t i = 0; i < count; ++i) std::memcpy(out + i * size, pattern, size);
}

// Copies a compact array of shape `src` into the top-left corner of a compact block of shape
// `dst` (same rank, dst >= src in every dimension).
void copy_padded(const unsigned char* src, const Shape& src_shape, unsigned char* dst,
                 const Shape& dst_shape, size_t elem, int dim) {
  const int nd = src_shape.ndim();
  if (dim == nd) {
    std::memcpy(dst, src, elem);
    return;
  }
  size_t src_inner = elem, dst_inner = elem;
  for (int d = dim + 1; d < nd; ++d) {
    src_inner *= static_cast<size_t>(src_shape[d]);
    dst_inner *= static_cast<size_t>(dst_shape[d]);
  }
  if (dim == nd - 1) {
    std::memcpy(dst, src, src_inner * static_cast<size_t>(src_shape[dim]));
    return;
  }
  for (int64_t i = 0; i < src_shape[dim]; ++i) {
    copy_padded(src + i * src_inner, src_shape, dst + i * dst_inner, dst_shape, elem, dim + 1);
  }
}

// Runs `tasks` row-copy jobs, spread over engine operations when there is enough to copy.
void run_copies(size_t total_bytes, int num_parallel, int64_t rows,
                const std::function<void(int64_t, int64_t)>& copy_rows) {
  if (num_parallel <= 1 || total_bytes < kParallelCopyBytes || rows < 2) {
    copy_rows(0, rows);
    return;
  }
  struct Join {
    std::mutex mutex;
    std::condition_variable done;
    int pending = 0;
    std::exception_ptr error;
  };
  auto join = std::make_shared<Join>();
  const int parts = static_cast<int>(std::min<int64_t>(num_parallel, rows));
  Engine& engine = Runtime::get().engine();
  int64_t pushed_rows = 0;
  try {
    for (int p = 0; p < parts; ++p) {
      const int64_t begin = rows * p / parts, end = rows * (p + 1) / parts;
      {
        std::lock_guard<std::mutex> lock(join->mutex);
        ++join->pending;
      }
      // Note [Batch copies on the engine]: like map, the copies name no variables (the batch
      // and its rows belong to this stage alone); the caller waits for all of them below.
      try {
        engine.push_sync(
            [join, &copy_rows, begin, end](const RunContext&) {
              std::exception_ptr error;
              try {
                copy_rows(begin, end);
              } catch (...) {
                error = std::current_exception();
              }
              std::lock_guard<std::mutex> lock(join->mutex);
              if (error && !join->error) join->error = error;
              if (--join->pending == 0) join->done.notify_all();
            },
            Device::cpu(), {}, {}, FnProperty::kNormal, 0, "data.batch");
      } catch (...) {
        std::lock_guard<std::mutex> lock(join->mutex);
        --join->pending;
        throw;
      }
      pushed_rows = end;
    }
  } catch (...) {
    // A push failed: the copies already pushed refer to copy_rows, so they finish before this
    // frame unwinds; the remaining rows are copied here.
    copy_rows(pushed_rows, rows);
  }
  std::unique_lock<std::mutex> lock(join->mutex);
  join->done.wait(lock, [&] { return join->pending == 0; });
  if (join->error) std::rethrow_exception(join->error);
}

class BatchNode final : public DatasetNode {
 public:
  BatchNode(NodePtr input, int64_t size, bool drop_remainder, int num_parallel, bool padded,
            std::vector<std::vector<int64_t>> padded_shapes, double padding_value)
      : input_(std::move(input)),
        size_(size),
        drop_remainder_(drop_remainder),
        num_parallel_(std::max(1, num_parallel)),
        padded_(padded),
        padded_shapes_(std::move(padded_shapes)),
        padding_value_(padding_value) {
    WEFT_CHECK(size_ >= 1) << stage() << ": the batch size must be >= 1";
  }
  std::string stage() const {
    return std::string(padded_ ? "padded_batch(" : "batch(") + std::to_string(size_) + ")";
  }
  std::unique_ptr<Iterator> make_iterator(const IterContext& ctx) const override;
  std::string describe() const override { return stage() + " <- " + input_->describe(); }
  int64_t cardinality() const override {
    const int64_t n = input_->cardinality();
    if (n < 0) return n;
    return drop_remainder_ ? n / size_ : (n + size_ - 1) / size_;
  }

  // Stacks `rows` into one element.
  Element stack(std::vector<Element>& rows) const;
  // Throws DataError for `e` when it cannot join a batch that starts with `first`: another
  // number of arrays, dtypes or ranks, or (batch, not padded_batch) other shapes.
  void check_fits(const Element& first, const Element& e) const;

  NodePtr input_;
  int64_t size_;
  bool drop_remainder_;
  int num_parallel_;
  bool padded_;
  std::vector<std::vector<int64_t>> padded_shapes_;
  double padding_value_;
};

void BatchNode::check_fits(const Element& first, const Element& e) const {
  if (e.arrays.size() != first.arrays.size()) {
    throw DataError(stage() + ": " + detail::describe_element(e.index, e.origin) + " has " +
                        std::to_string(e.arrays.size()) + " arrays, the batch's first has " +
                        std::to_string(first.arrays.size()),
                    e.index, e.origin);
  }
  for (size_t c = 0; c < e.arrays.size(); ++c) {
    const NDArray &a = e.arrays[c], &f = first.arrays[c];
    if (a.dtype() != f.dtype() || a.ndim() != f.ndim() || (!padded_ && a.shape() != f.shape())) {
      throw DataError(stage() + ": array " + std::to_string(c) + " of " +
                          detail::describe_element(e.index, e.origin) + " is " +
                          shape_text(a.shape()) + " " + dtype_name(a.dtype()) +
                          " but the batch's first is " + shape_text(f.shape()) + " " +
                          dtype_name(f.dtype()) +
                          (padded_ ? " (padded_batch needs equal ranks and dtypes)"
                                   : " (use padded_batch for varying shapes)"),
                      e.index, e.origin);
    }
  }
}

Element BatchNode::stack(std::vector<Element>& rows) const {
  const Element& first = rows.front();
  const size_t arity = first.arrays.size();
  const int64_t n = static_cast<int64_t>(rows.size());
  Element out;
  out.index = first.index;
  out.origin = "batch of " + detail::describe_element(first.index, first.origin) + " .. " +
               detail::describe_element(rows.back().index, rows.back().origin);
  // Every row passed check_fits against the first when it was gathered.
  for (size_t c = 0; c < arity; ++c) {
    const DType dtype = first.arrays[c].dtype();
    Shape row_shape = first.arrays[c].shape();
    std::vector<int64_t> target = row_shape.to_vector();
    for (const Element& e : rows) {
      const NDArray& a = e.arrays[c];
      for (int d = 0; d < a.ndim(); ++d) target[d] = std::max(target[d], a.shape()[d]);
    }
    if (padded_ && c < padded_shapes_.size() && !padded_shapes_[c].empty()) {
      const auto& want = padded_shapes_[c];
      WEFT_CHECK(static_cast<int>(want.size()) == row_shape.ndim())
          << stage() << ": padded shape " << c << " has " << want.size()
          << " dimensions, the arrays have " << row_shape.ndim();
      for (size_t d = 0; d < want.size(); ++d) {
        if (want[d] < 0) continue;
        if (want[d] < target[d]) {
          throw DataError(stage() + ": array " + std::to_string(c) + " needs " +
                              std::to_string(target[d]) + " in dimension " + std::to_string(d) +
                              ", more than the padded shape's " + std::to_string(want[d]),
                          first.index, first.origin);
        }
        target[d] = want[d];
      }
    }
    const Shape target_shape(target);
    std::vector<int64_t> batch_dims{n};
    batch_dims.insert(batch_dims.end(), target.begin(), target.end());
    NDArray batch = NDArray::empty(Shape(batch_dims), dtype, Device::cpu());
    const size_t elem = dtype_size(dtype);
    const size_t row_bytes = static_cast<size_t>(target_shape.size()) * elem;
    auto* base = static_cast<unsigned char*>(batch.raw_data());
    auto copy_rows = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const NDArray& a = rows[r].arrays[c];
        unsigned char* dst = base + r * row_bytes;
        const auto* src = static_cast<const unsigned char*>(a.raw_data());
        if (a.shape() == target_shape) {
          if (row_bytes > 0) std::memcpy(dst, src, row_bytes);
          continue;
        }
        fill_value(dst, target_shape.size(), dtype, padding_value_);
        if (a.size() > 0) copy_padded(src, a.shape(), dst, target_shape, elem, 0);
      }
    };
    run_copies(row_bytes * static_cast<size_t>(n), num_parallel_, n, copy_rows);
    out.arrays.push_back(std::move(batch));
  }
  return out;
}

class BatchIterator final : public Iterator {
 public:
  BatchIterator(const BatchNode& node, const IterContext& ctx)
      : node_(node), input_(node.input_->make_iterator(ctx)) {}
  std::optional<Element> next() override {
    // Elements gathered before an input error stay in pending_, so the next call continues
    // this batch after the failed element.
    while (!input_done_ && static_cast<int64_t>(pending_.size()) < node_.size_) {
      std::optional<Element> e = input_->next();
      if (!e) {
        input_done_ = true;
        break;
      }
      detail::check_host_arrays(*e, node_.stage());
      // An element that does not fit the batch fails alone; the rows gathered stay.
      if (!pending_.empty()) node_.check_fits(pending_.front(), *e);
      pending_.push_back(std::move(*e));
    }
    if (pending_.empty()) return std::nullopt;
    if (static_cast<int64_t>(pending_.size()) < node_.size_ && node_.drop_remainder_) {
      pending_.clear();
      return std::nullopt;
    }
    std::vector<Element> rows;
    rows.swap(pending_);
    return node_.stack(rows);
  }
  void collect_stats(IteratorStats& stats) const override { input_->collect_stats(stats); }

 private:
  const BatchNode& node_;
  std::unique_ptr<Iterator> input_;
  std::vector<Element> pending_;
  bool input_done_ = false;
};

std::unique_ptr<Iterator> BatchNode::make_iterator(const IterContext& ctx) const {
  return std::make_unique<BatchIterator>(*this, ctx);
}

}  // namespace

Dataset Dataset::batch(int64_t size, bool drop_remainder, int num_parallel) const {
  return Dataset(std::make_shared<BatchNode>(node_, size, drop_remainder, num_parallel, false,
                                             std::vector<std::vector<int64_t>>{}, 0.0));
}

Dataset Dataset::padded_batch(int64_t size, std::vector<std::vector<int64_t>> padded_shapes,
                              double padding_value, bool drop_remainder) const {
  return Dataset(std::make_shared<BatchNode>(node_, size, drop_remainder, 1, true,
                                             std::move(padded_shapes), padding_value));
}

}  // namespace weft::data
