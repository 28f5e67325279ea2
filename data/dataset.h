// Dataset: a lazy, composable input pipeline (sources, map, filter, shuffle, batch, repeat,
// take/skip, shard, interleave, cache, prefetch) whose parallel stages run on the engine's CPU
// workers. docs/DATA.md describes the design.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/device.h"
#include "data/element.h"

namespace weft::data {

/// Counters of one iteration (a snapshot; stages fill in what they know).
struct IteratorStats {
  int64_t elements = 0;          ///< elements returned to the consumer
  int64_t skipped_errors = 0;    ///< failed elements dropped by ignore_errors()
  int64_t consumer_wait_ns = 0;  ///< time next() spent waiting on a prefetch buffer
  int64_t buffered = 0;          ///< elements ready in prefetch buffers now
};

/// Produces a dataset's elements in order. Call from one thread at a time.
class Iterator {
 public:
  virtual ~Iterator() = default;
  /// The next element, or std::nullopt at the end. A failed element throws DataError (naming
  /// the element, its origin and the stage) once; the next call continues after it where the
  /// source can (a RecordIO file read without its index whose framing is corrupt cannot: after
  /// the error its iteration ends).
  virtual std::optional<Element> next() = 0;
  /// Adds this stage's counters (and its inputs') to `stats`.
  virtual void collect_stats(IteratorStats& stats) const {}
  IteratorStats stats() const {
    IteratorStats s;
    collect_stats(s);
    return s;
  }
};

/// What an iterator knows when it is made: which pass of the enclosing repeat() it serves (0 for
/// the first). Stages with randomness count their own passes (Note [Shuffle buffer]).
struct IterContext {
  int64_t epoch = 0;
};

namespace detail {
/// A node of the pipeline graph. Immutable once built; make_iterator may be called from any
/// thread, any number of times.
class DatasetNode {
 public:
  virtual ~DatasetNode() = default;
  virtual std::unique_ptr<Iterator> make_iterator(const IterContext& ctx) const = 0;
  /// "map(decode_image) <- image_folder(/data/train)"
  virtual std::string describe() const = 0;
  /// The number of elements: >= 0, kUnknownCardinality or kInfiniteCardinality.
  virtual int64_t cardinality() const;
};
}  // namespace detail

inline constexpr int64_t kUnknownCardinality = -2;
inline constexpr int64_t kInfiniteCardinality = -1;

/// A map function: receives an element's arrays (CPU, no pending work, owned by the call) and
/// a generator unique to the element, returns the new arrays. Runs on an engine CPU worker (or
/// a thread of the map's own pool); must be thread-safe across elements and must not wait on
/// engine work: read arrays through host_data<T>() (not to_vector or item, which wait and are
/// refused inside engine operations) and compute with run_host_op or plain loops. Arrays it
/// returns from imperative operations (pending work) are waited for by the next stage.
using MapFn = std::function<std::vector<NDArray>(std::vector<NDArray> arrays, Rng& rng)>;
/// A predicate of filter(); called on the consumer's thread.
using FilterFn = std::function<bool(const std::vector<NDArray>& arrays)>;

/// Where a map runs its function.
enum class MapExecutor {
  kEngine,      ///< pushed as operations onto the engine's CPU workers (default)
  kThreadPool,  ///< on `num_parallel` threads of the map's own (functions that take a lock such
                ///< as Python's GIL, which must not hold engine workers)
};

struct MapOptions {
  /// Elements in flight at once (1: one at a time, still off the consumer's thread).
  int num_parallel = 1;
  /// Keep the input order (true) or return elements as they finish (false: faster when
  /// element costs vary; the order then depends on timing).
  bool deterministic = true;
  /// Seed of the per-element generators; unset: drawn once per iterator from the OS. Pass k
  /// (the k-th iterate() or repeat() pass) uses (seed, k): new draws every epoch.
  std::optional<uint64_t> seed;
  MapExecutor executor = MapExecutor::kEngine;
  /// Names the function in descriptions and errors.
  std::string name = "fn";
};

struct PrefetchOptions {
  /// Elements (usually batches) kept ready ahead of the consumer; bounds memory.
  int buffer = 2;
  /// Device the arrays are copied to, asynchronously, before they are handed out; unset: they
  /// stay on the CPU.
  std::optional<Device> device;
};

/// A lazy, immutable description of a pipeline. Transforms return a new Dataset and leave this
/// one unchanged; nothing runs until iterate(). Copies are cheap (shared nodes). Thread-safe.
class Dataset {
 public:
  explicit Dataset(std::shared_ptr<const detail::DatasetNode> node);

  /// Applies `fn` to every element, `options.num_parallel` at a time.
  Dataset map(MapFn fn, MapOptions options = {}) const;
  /// Keeps the elements for which `pred` is true.
  Dataset filter(FilterFn pred, std::string name = "fn") const;
  /// Returns elements in a random order drawn from a buffer of `buffer` elements (a uniform
  /// permutation when buffer >= the dataset's size). With a seed the order is reproducible; with
  /// reshuffle_each_iteration each pass (each iterate(), each pass of repeat()) draws a new
  /// order: pass k of the dataset uses (seed, k). Without a seed, one is drawn from the OS when
  /// the dataset is made.
  Dataset shuffle(int64_t buffer, std::optional<uint64_t> seed = std::nullopt,
                  bool reshuffle_each_iteration = true) const;
  /// Stacks `size` consecutive elements along a new first axis (every element's arrays must have
  /// equal shapes and dtypes). The last batch may be smaller unless drop_remainder. Rows are
  /// copied by `num_parallel` engine operations.
  Dataset batch(int64_t size, bool drop_remainder = false, int num_parallel = 1) const;
  /// Like batch(), padding each array to `padded_shapes[i]` (per array, without the batch axis;
  /// -1 or an empty list: the largest in the batch) with `padding_value`.
  Dataset padded_batch(int64_t size, std::vector<std::vector<int64_t>> padded_shapes = {},
                       double padding_value = 0, bool drop_remainder = false) const;
  /// Repeats the dataset `count` times (-1: forever).
  Dataset repeat(int64_t count = -1) const;
  /// The first `n` elements (n < 0: all).
  Dataset take(int64_t n) const;
  /// All but the first `n` elements.
  Dataset skip(int64_t n) const;
  /// Every `num`-th element starting at `index` (one worker's share of the data).
  Dataset shard(int64_t num, int64_t index) const;
  /// Maps each element to a dataset and interleaves their elements: `cycle_length` of them open
  /// at once, `block_length` consecutive elements from each in turn (files read side by side).
  Dataset interleave(std::function<Dataset(const Element&)> fn, int64_t cycle_length,
                     int64_t block_length = 1) const;
  /// Keeps the elements of the first complete pass in memory (path empty) or in a file (path),
  /// and replays them on later passes without running the stages above.
  Dataset cache(std::string path = "") const;
  /// Runs the pipeline ahead of the consumer on a background producer, keeping up to
  /// options.buffer elements ready (back-pressure: it blocks when the buffer is full).
  Dataset prefetch(PrefetchOptions options) const;
  Dataset prefetch(int buffer) const { return prefetch(PrefetchOptions{buffer, std::nullopt}); }
  /// Drops elements whose stage failed (they are counted in IteratorStats::skipped_errors)
  /// instead of throwing them to the consumer.
  Dataset ignore_errors() const;

  /// Starts a pass over the data.
  std::unique_ptr<Iterator> iterate() const;
  std::string describe() const { return node_->describe(); }
  /// The number of elements, kUnknownCardinality or kInfiniteCardinality.
  int64_t cardinality() const { return node_->cardinality(); }
  const std::shared_ptr<const detail::DatasetNode>& node() const { return node_; }

 private:
  std::shared_ptr<const detail::DatasetNode> node_;
};

// ---- in-memory sources -----------------------------------------------------------------------

/// One element per row (first axis) of the arrays, which must agree in their first dimension
/// (tf.data's from_tensor_slices). Rows are views of the given arrays; waits for their pending
/// writes when the iterator starts.
Dataset from_arrays(std::vector<NDArray> arrays, std::string name = "arrays");
/// The int64 scalars start, start + step, ... below stop.
Dataset range(int64_t start, int64_t stop, int64_t step = 1);
/// Elements from a function that makes a generator per pass: each call of the generator
/// returns the next element's arrays or std::nullopt at the end. Called on the consumer's (or
/// prefetcher's) thread.
using GeneratorFn = std::function<std::optional<std::vector<NDArray>>()>;
Dataset from_generator(std::function<GeneratorFn()> make_generator, std::string name = "generator");

}  // namespace weft::data
