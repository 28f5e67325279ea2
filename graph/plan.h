// Static memory planning: every intermediate entry (and every declared workspace) of a graph gets
// a byte offset in one arena per device, reusing memory whose lifetime has ended and honouring
// in-place options. Also the abstract planner it is built on, the lower bound and baselines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/infer.h"
#include "graph/streams.h"

namespace weft::graph {

// ---- the abstract problem ----------------------------------------------------------------------

/// One buffer to place: `bytes` live from step `first` (written there) to step `last` (last read;
/// inclusive). `inplace_from` >= 0 names an earlier buffer whose memory this one may take over
/// (it dies at `first`, where this one is written: FInplaceOption).
struct PlanBuffer {
  size_t bytes = 0;
  uint32_t first = 0;
  uint32_t last = 0;
  int32_t inplace_from = -1;
};

/// Offsets for every buffer, and the figures every plan reports.
struct BufferPlan {
  std::vector<size_t> offsets;  ///< per buffer
  std::vector<bool> inplace;    ///< per buffer: it shares its inplace_from buffer's memory
  size_t arena_bytes = 0;       ///< the arena size the offsets need
  size_t lower_bound = 0;       ///< peak over steps of the live bytes (in-place pairs count once)
  size_t no_reuse = 0;          ///< sum of all buffer sizes (aligned)
  double ratio() const {
    return lower_bound ? static_cast<double>(arena_bytes) / lower_bound : 1.0;
  }
};

struct PlanOptions {
  size_t alignment = 64;  ///< every offset and size is rounded up to this
  bool allow_inplace = true;
};

/// Places the buffers (weft's planner). Sizes are rounded up to the alignment.
BufferPlan plan_buffers(const std::vector<PlanBuffer>& buffers, const PlanOptions& options = {});

/// A baseline like MXNet's graph allocator: buffers share whole storage blocks (a freed block is
/// reused by a later request of a similar size, growing the block when needed); the arena is the
/// sum of the blocks. Reported next to weft's plan in the planner benchmark.
BufferPlan plan_buffers_block_sharing(const std::vector<PlanBuffer>& buffers,
                                      const PlanOptions& options = {});

/// Checks a plan: every offset aligned, every buffer inside the arena, and no two buffers whose
/// lifetimes overlap share a byte (except in-place pairs). Throws InternalError naming both.
void check_buffer_plan(const std::vector<PlanBuffer>& buffers, const BufferPlan& plan,
                       const PlanOptions& options = {});

// ---- graphs ------------------------------------------------------------------------------------

/// What lives in the arena and where.
struct MemoryPlan {
  /// Per entry id: offset in the arena, or -1 when the entry is not planned (variables, heads and
  /// entries named in `external`, which the executor allocates on their own).
  std::vector<int64_t> entry_offset;
  /// Per entry id: bytes (shape size × dtype size, or GraphPlanOptions::entry_bytes when larger),
  /// 0 when not planned.
  std::vector<size_t> entry_bytes;
  /// Per entry id: the input entry it shares memory with in place, or -1.
  std::vector<int64_t> entry_inplace_of;
  /// Per node: workspace offset and bytes (FResourceRequest kWorkspace), -1 / 0 when none.
  std::vector<int64_t> workspace_offset;
  std::vector<size_t> workspace_bytes;
  /// The problem as given to plan_buffers, and its result (figures: arena, lower bound, no-reuse).
  std::vector<PlanBuffer> buffers;
  BufferPlan plan;
  /// Which buffer each planned entry / workspace is (index into `buffers`), -1 when none.
  std::vector<int32_t> entry_buffer;
  std::vector<int32_t> workspace_buffer;
};

struct GraphPlanOptions {
  PlanOptions plan;
  /// Entries the executor keeps outside the arena (besides variables and heads), by entry id.
  std::vector<uint32_t> external;
  /// Plan with the block-sharing baseline instead of weft's planner.
  bool baseline = false;
  /// Per entry id (or empty): bytes to reserve for the entry when more than its shape's size, as
  /// for an entry in a padded blocked layout (LayoutPlan::entry_bytes, graph/layout.h); 0 = the
  /// shape's size.
  std::vector<size_t> entry_bytes;
  /// Per entry id (or empty): the entry's layout (LayoutPlan::layouts). A node with a non-plain
  /// input or output asks FLayoutResourceRequest for its workspace when it has one.
  std::vector<LayoutRef> layouts;
  /// A multi-stream plan of the graph (graph/streams.h), or null: nodes run one at a time in node
  /// order. With one, a buffer's lifetime runs to the last node (in node order) that is not
  /// ordered after every access of it, so that two buffers alive at the same time on different
  /// streams never share memory (Note [Plans across streams] in plan.cc).
  const StreamPlan* streams = nullptr;
  /// Per node (or empty): the node runs on another device than the arena's (mixed placement), so
  /// its outputs and its workspace are not planned; its workspace size is still reported.
  std::vector<bool> off_arena;
  /// The device type the nodes run on, and per node (or empty) where that differs: a node's
  /// workspace is what its kernel on that device asks for (Op::resource_request).
  DeviceType device = DeviceType::kCPU;
  std::vector<DeviceType> node_devices;
};

/// Plans the graph's memory for the given inferred shapes and types, in node order (the order the
/// executor runs). Every op node's outputs are written at its step; an entry lives until its last
/// reader's step. Requires complete inference (ShapeError otherwise).
MemoryPlan plan_memory(const Graph& graph, const InferResult& inferred,
                       const GraphPlanOptions& options = {});

/// A readable listing of the plan (one line per buffer: node, output, bytes, offset, lifetime)
/// ending with `plan arena=<bytes> lower_bound=<bytes> no_reuse=<bytes> ratio=<r>`.
std::string describe_plan(const Graph& graph, const MemoryPlan& plan);

}  // namespace weft::graph
