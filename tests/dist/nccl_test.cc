// Collectives of GPU arrays over NCCL against references computed on the CPU in one process
// (rank r's data is a known function of r, as in collectives_test.cc). Part of weft_dist_tests:
// run alone (a group of one: a one-rank NCCL communicator) and under mpirun -np 2 / -np 4. Every
// GPU test skips, on every rank alike, unless this build has NCCL and each process of a host has
// a GPU of its own (NCCL refuses two ranks on one GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "base/build_config.h"
#include "devices/device_api.h"
#include "dist/dist.h"
#include "dist/gpu_collectives.h"
#include "dist/meta.h"
#include "dist/transport.h"
#include "ndarray/ops.h"
#include "tests/dist/gpu_group.h"

#if WEFT_USE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace weft::dist {
namespace {

// Why the GPU tests cannot run here ("" when they can); every rank agrees (one CPU allreduce).
const std::string& gpu_skip_reason() {
  static const std::string reason = test_support::gpu_group_skip_reason("nccl_test.ready");
  return reason;
}

#define SKIP_WITHOUT_GPU_GROUP()                                       \
  do {                                                                 \
    if (!gpu_skip_reason().empty()) GTEST_SKIP() << gpu_skip_reason(); \
  } while (0)

Device gpu() { return detail::process_gpu(local_rank()); }

// Rank r's i-th element for a collective salted by s: small halves (products: 1..3), exact in
// every type tested, bfloat16 included, and so are their sums, maxima and products.
double value(int r, int64_t i, int s, ReduceOp op) {
  if (op == ReduceOp::kProd) return 1 + (r + i + s) % 3;
  return ((r + 1) + (i + s) % 7) * 0.5;
}

bool is_integer(DType dtype) { return dtype == DType::kInt32 || dtype == DType::kInt64; }

// The array of rank r on this process's GPU, in `dtype` (made in float64 on the CPU, copied,
// then cast on the GPU: the CPU has no float16 cast).
NDArray on_gpu(int r, int64_t n, int s, ReduceOp op, DType dtype) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double x = value(r, i, s, op);
    v[static_cast<size_t>(i)] = is_integer(dtype) ? std::trunc(x) : x;
  }
  NDArray cpu = NDArray::from_host(v.data(), Shape{n}, DType::kFloat64);
  NDArray x = cpu.copy_to(gpu());
  return dtype == DType::kFloat64 ? x : op::cast(x, dtype);
}

std::vector<double> read(const NDArray& a) {
  EXPECT_EQ(a.device(), gpu());
  return (a.dtype() == DType::kFloat64 ? a : op::cast(a, DType::kFloat64)).to_doubles();
}

// The reduction over every rank of element i, computed here on the CPU in double.
double reference(ReduceOp op, int64_t i, int s, DType dtype) {
  const int n = size();
  std::vector<double> xs;
  for (int r = 0; r < n; ++r) {
    double x = value(r, i, s, op);
    xs.push_back(is_integer(dtype) ? std::trunc(x) : x);
  }
  switch (op) {
    case ReduceOp::kSum:
      return std::accumulate(xs.begin(), xs.end(), 0.0);
    case ReduceOp::kMean: {
      double sum = std::accumulate(xs.begin(), xs.end(), 0.0);
      return is_integer(dtype) ? std::trunc(sum / n) : sum / n;
    }
    case ReduceOp::kMax:
      return *std::max_element(xs.begin(), xs.end());
    case ReduceOp::kMin:
      return *std::min_element(xs.begin(), xs.end());
    case ReduceOp::kProd: {
      double p = 1;
      for (double x : xs) p *= x;
      return p;
    }
  }
  return 0;
}

// Mean is the one inexact result (NCCL scales each input by 1/size before summing).
double tolerance(ReduceOp op, DType dtype) {
  if (op != ReduceOp::kMean || is_integer(dtype)) return 0;
  switch (dtype) {
    case DType::kFloat16:
      return 2e-3;
    case DType::kBFloat16:
      return 1e-2;
    case DType::kFloat32:
      return 1e-6;
    default:
      return 1e-12;
  }
}

void expect_reduced(const NDArray& out, ReduceOp op, int s, DType dtype, int64_t offset = 0) {
  auto got = read(out);
  for (size_t i = 0; i < got.size(); ++i) {
    double want = reference(op, offset + static_cast<int64_t>(i), s, dtype);
    ASSERT_NEAR(got[i], want, tolerance(op, dtype) * std::abs(want))
        << reduce_op_name(op) << " " << dtype_name(dtype) << " element " << i << " on rank "
        << rank();
  }
}

const DType kTypes[] = {DType::kFloat32,  DType::kFloat64, DType::kFloat16,
                        DType::kBFloat16, DType::kInt32,   DType::kInt64};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin,
                         ReduceOp::kProd};

TEST(Nccl, AllreduceEveryOpAndTypeMatchesTheCpuReference) {
  SKIP_WITHOUT_GPU_GROUP();
  int salt = 0;
  for (DType dtype : kTypes) {
    for (ReduceOp op : kOps) {
      const int s = ++salt;
      const int64_t n = 1031;
      NDArray in = on_gpu(rank(), n, s, op, dtype);
      NDArray out = NDArray::empty(Shape{n}, dtype, gpu());
      allreduce(in, out, op);
      expect_reduced(out, op, s, dtype);
      NDArray same = on_gpu(rank(), n, s, op, dtype);
      allreduce(same, same, op);  // in place
      expect_reduced(same, op, s, dtype);
      EXPECT_EQ(read(in), read(on_gpu(rank(), n, s, op, dtype))) << "the input was written";
    }
  }
}

TEST(Nccl, BroadcastFromEveryRoot) {
  SKIP_WITHOUT_GPU_GROUP();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kInt64}) {
    for (int root = 0; root < size(); ++root) {
      NDArray a = on_gpu(rank(), 300, 7, ReduceOp::kSum, dtype);
      broadcast(a, root);
      EXPECT_EQ(read(a), read(on_gpu(root, 300, 7, ReduceOp::kSum, dtype)))
          << dtype_name(dtype) << " root " << root;
    }
  }
}

TEST(Nccl, AllgatherConcatenatesInRankOrder) {
  SKIP_WITHOUT_GPU_GROUP();
  for (DType dtype : {DType::kFloat16, DType::kFloat64}) {
    NDArray in = on_gpu(rank(), 6, 3, ReduceOp::kSum, dtype).reshape(Shape{2, 3});
    NDArray out = NDArray::empty(Shape{2 * size(), 3}, dtype, gpu());
    allgather(in, out);
    std::vector<double> want;
    for (int r = 0; r < size(); ++r) {
      auto part = read(on_gpu(r, 6, 3, ReduceOp::kSum, dtype));
      want.insert(want.end(), part.begin(), part.end());
    }
    EXPECT_EQ(read(out), want) << dtype_name(dtype);
  }
}

TEST(Nccl, ReduceScatterGivesEachRankItsSlice) {
  SKIP_WITHOUT_GPU_GROUP();
  const int64_t k = 5;
  int s = 40;
  for (DType dtype : kTypes) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
      ++s;
      NDArray in = on_gpu(rank(), k * size(), s, op, dtype);
      NDArray out = NDArray::empty(Shape{k}, dtype, gpu());
      reduce_scatter(in, out, op);
      expect_reduced(out, op, s, dtype, rank() * k);
    }
  }
}

// Named allreduces issued in different orders on odd and even ranks: matched by name, and the
// small ones fused (one NCCL group per batch).
TEST(Nccl, NamedAllreducesInDifferentOrdersAreMatchedAndFused) {
  SKIP_WITHOUT_GPU_GROUP();
  const int count = 64;
  std::vector<NDArray> arrays(count);
  std::vector<int> order(count);
  std::iota(order.begin(), order.end(), 0);
  if (rank() % 2 == 1) std::reverse(order.begin(), order.end());
  Stats before = stats();
  for (int j : order) {
    const DType dtype = j % 2 == 0 ? DType::kFloat32 : DType::kBFloat16;
    auto& a = arrays[static_cast<size_t>(j)];
    a = on_gpu(rank(), 17 + j, 100 + j, ReduceOp::kSum, dtype);
    allreduce(a, a, ReduceOp::kSum, CollectiveOptions{"g" + std::to_string(j), 0});
  }
  for (int j = 0; j < count; ++j) {
    expect_reduced(arrays[static_cast<size_t>(j)], ReduceOp::kSum, 100 + j,
                   arrays[static_cast<size_t>(j)].dtype());
  }
  Stats after = stats();
  EXPECT_EQ(after.collectives - before.collectives, count);
  if (Options::from_environment().fusion_bytes == 0) {
    EXPECT_EQ(after.transport_calls - before.transport_calls, count);
  } else if (size() > 1) {
    EXPECT_LT(after.transport_calls - before.transport_calls, count);
  }
}

// The engine orders GPU collectives with the GPU operations around them.
TEST(Nccl, OrderedWithGpuOperations) {
  SKIP_WITHOUT_GPU_GROUP();
  NDArray x = NDArray::ones(Shape{100000}, DType::kFloat32, gpu());
  for (int i = 0; i < 3; ++i) allreduce(x, x, ReduceOp::kSum, CollectiveOptions{"gchain", 0});
  NDArray y = x * 2.0 + 1.0;  // on the GPU, after the third allreduce
  allreduce(y, y, ReduceOp::kMax, CollectiveOptions{"gchain.max", 0});
  const double n = size();
  for (double v : read(y)) ASSERT_EQ(v, 2 * n * n * n + 1);
}

TEST(Nccl, BadGpuArgumentsAreRefusedAtPushNamingTheTensor) {
  SKIP_WITHOUT_GPU_GROUP();
  NDArray g = NDArray::zeros(Shape{4}, DType::kFloat32, gpu());
  NDArray c = NDArray::zeros(Shape{4});
  try {
    allreduce(g, c, ReduceOp::kSum, CollectiveOptions{"mixed", 0});
    FAIL() << "a GPU input with a CPU output was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce 'mixed'"), std::string::npos) << e.what();
  }
  NDArray shorts = NDArray::zeros(Shape{4}, DType::kInt16, gpu());
  try {
    allreduce(shorts, shorts, ReduceOp::kSum, CollectiveOptions{"shorts", 0});
    FAIL() << "an int16 GPU array was accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("int16"), std::string::npos) << e.what();
  }
}

// Rank 0 holds a GPU array where the others hold CPU arrays: every rank gets a DistError naming
// the tensor, and the group goes on.
TEST(Nccl, RanksDisagreeingOnTheDeviceFailThatCollectiveOnly) {
  SKIP_WITHOUT_GPU_GROUP();
  if (size() == 1) GTEST_SKIP() << "needs two ranks";
  NDArray a =
      rank() == 0 ? NDArray::ones(Shape{8}, DType::kFloat32, gpu()) : NDArray::ones(Shape{8});
  allreduce(a, a, ReduceOp::kSum, CollectiveOptions{"where", 0});
  try {
    a.wait_to_read();
    FAIL() << "the mismatch was not reported";
  } catch (const DistError& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce 'where'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos) << e.what();
  }
  NDArray b = NDArray::ones(Shape{8}, DType::kFloat32, gpu());
  allreduce(b, b, ReduceOp::kSum, CollectiveOptions{"after", 0});
  for (double v : read(b)) EXPECT_EQ(v, size());
}

// Runs without a GPU: the device a rank holds travels with a collective's description, and a
// difference is named.
TEST(NcclPlumbing, TheDeviceIsPartOfWhatRanksAgreeOn) {
  detail::Meta cpu_meta;
  cpu_meta.key = "w#0";
  cpu_meta.shape = {4};
  detail::Meta gpu_meta = cpu_meta;
  gpu_meta.gpu = true;
  detail::Writer w;
  detail::put_meta(w, gpu_meta);
  std::string message = w.take();
  detail::Reader in(message);
  EXPECT_TRUE(detail::get_meta(in).gpu);
  EXPECT_TRUE(in.done());
  EXPECT_EQ(detail::difference(gpu_meta, 0, cpu_meta, 1),
            "rank 0 has arrays on the GPU, rank 1 has CPU");
  EXPECT_EQ(detail::difference(gpu_meta, 0, gpu_meta, 1), "");
  EXPECT_EQ(detail::process_gpu(0).type, DeviceType::kCUDA);
  if (!detail::have_nccl()) {
    EXPECT_FALSE(detail::nccl_supports(DType::kFloat32));
  } else {
    for (DType t : kTypes) EXPECT_TRUE(detail::nccl_supports(t)) << dtype_name(t);
    EXPECT_FALSE(detail::nccl_supports(DType::kInt16));
    EXPECT_FALSE(detail::nccl_supports(DType::kBool));
  }
}

// Runs without a GPU, under mpirun: the ncclUniqueId's broadcast, which the NCCL bootstrap
// makes before it creates the communicator, gives up at its deadline instead of hanging when
// the root never comes (Note [Abortable bootstrap] in dist/nccl_transport.cc). A transport of
// its own (its own duplicated communicators) keeps the given-up broadcast away from the group's.
TEST(NcclPlumbing, TheBootstrapBroadcastGivesUpAtItsDeadline) {
  if (size() == 1 || !detail::have_mpi()) GTEST_SKIP() << "needs a group of two or more over MPI";
#if WEFT_USE_MPI
  int level = 0;
  MPI_Query_thread(&level);
  // This thread calls MPI while the coordinator thread does.
  if (level != MPI_THREAD_MULTIPLE) GTEST_SKIP() << "MPI gives no MPI_THREAD_MULTIPLE";
  using Clock = std::chrono::steady_clock;
  std::unique_ptr<detail::Transport> transport = detail::make_mpi_transport();
  // A root that is there: every rank gets its bytes.
  char id[16] = {};
  if (rank() == 0) std::strcpy(id, "the unique id");
  ASSERT_TRUE(
      transport->broadcast_until(id, sizeof(id), 0, Clock::now() + std::chrono::seconds(60)));
  EXPECT_STREQ(id, "the unique id");
  // A root that comes only after the others' deadline (as a dead one never does): they give up
  // at the deadline, their buffer untouched; the late root's broadcast still completes.
  const auto wait = std::chrono::milliseconds(300);
  char late[16] = {};
  if (rank() == 0) {
    std::this_thread::sleep_for(3 * wait);
    std::strcpy(late, "too late");
    EXPECT_TRUE(
        transport->broadcast_until(late, sizeof(late), 0, Clock::now() + std::chrono::seconds(60)));
  } else {
    const auto start = Clock::now();
    EXPECT_FALSE(transport->broadcast_until(late, sizeof(late), 0, start + wait));
    const auto waited = Clock::now() - start;
    EXPECT_GE(waited, wait);
    EXPECT_LT(waited, wait + std::chrono::seconds(10));
    EXPECT_STREQ(late, "");
  }
  barrier();  // over the group's own transport, which the given-up broadcast leaves alone
#endif
}

}  // namespace
}  // namespace weft::dist
