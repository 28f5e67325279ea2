// Collectives against references every rank computes from what each rank holds (rank r's data
// is a known function of r). Run by ctest alone (a group of one) and under
// `mpirun -np 2` and `-np 4` (tests/CMakeLists.txt); main() joins the group first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "dist/dist.h"
#include "ndarray/ops.h"
#include "ndarray/runtime.h"

namespace weft::dist {
namespace {

// Rank r's i-th element for a collective salted by `s`: exact in float32 (small integers and
// halves), so sums compare exactly whatever the reduction order.
double value(int r, int64_t i, int s) {
  return static_cast<double>((r + 1) * (s + 1) + (i % 97)) * 0.5;
}

template <typename T>
NDArray filled(int r, int64_t n, int s, DType dtype) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<T>(value(r, i, s));
  return NDArray::from_host(v.data(), Shape{n}, dtype);
}

NDArray make(int r, int64_t n, int s, DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return filled<float>(r, n, s, dtype);
    case DType::kFloat64:
      return filled<double>(r, n, s, dtype);
    case DType::kInt32:
      return filled<int32_t>(r, n, s, dtype);
    case DType::kInt64:
      return filled<int64_t>(r, n, s, dtype);
    default:
      throw Error("test: dtype");
  }
}

// The reduction of value(0..size-1, i, s), with integer semantics for integer types.
double reference(ReduceOp op, int64_t i, int s, bool integer) {
  int n = size();
  std::vector<double> xs;
  for (int r = 0; r < n; ++r) {
    double x = value(r, i, s);
    xs.push_back(integer ? std::trunc(x) : x);
  }
  switch (op) {
    case ReduceOp::kSum:
      return std::accumulate(xs.begin(), xs.end(), 0.0);
    case ReduceOp::kMean: {
      double sum = std::accumulate(xs.begin(), xs.end(), 0.0);
      return integer ? std::trunc(sum / n) : sum / n;
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

void expect_reduced(const NDArray& out, ReduceOp op, int s, bool integer, double rtol = 0) {
  auto got = out.to_doubles();
  for (size_t i = 0; i < got.size(); ++i) {
    double want = reference(op, static_cast<int64_t>(i), s, integer);
    ASSERT_NEAR(got[i], want, rtol * std::abs(want))
        << reduce_op_name(op) << " element " << i << " on rank " << rank();
  }
}

TEST(Collectives, AllreduceEveryOpAndTypeOutOfPlaceAndInPlace) {
  int salt = 0;
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64}) {
    bool integer = dtype == DType::kInt32 || dtype == DType::kInt64;
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kProd}) {
      ++salt;
      int s = op == ReduceOp::kProd ? 0 : salt;  // keep products small and exact
      int64_t n = op == ReduceOp::kProd ? 5 : 1031;
      NDArray in = make(rank(), n, s, dtype);
      NDArray out = NDArray::empty(Shape{n}, dtype);
      allreduce(in, out, op);
      expect_reduced(out, op, s, integer, op == ReduceOp::kMean && !integer ? 1e-7 : 0);
      NDArray same = make(rank(), n, s, dtype);
      allreduce(same, same, op);  // in place
      expect_reduced(same, op, s, integer, op == ReduceOp::kMean && !integer ? 1e-7 : 0);
      // The input of an out-of-place allreduce is untouched.
      auto before = make(rank(), n, s, dtype).to_doubles();
      EXPECT_EQ(in.to_doubles(), before);
    }
  }
}

TEST(Collectives, BroadcastFromEveryRoot) {
  for (int root = 0; root < size(); ++root) {
    NDArray a = make(rank(), 300, 7, DType::kFloat32);
    broadcast(a, root);
    auto want = make(root, 300, 7, DType::kFloat32).to_doubles();
    EXPECT_EQ(a.to_doubles(), want) << "root " << root;
  }
}

TEST(Collectives, AllgatherConcatenatesInRankOrder) {
  NDArray in = make(rank(), 6, 3, DType::kFloat32).reshape(Shape{2, 3});
  NDArray out = NDArray::empty(Shape{2 * size(), 3}, DType::kFloat32);
  allgather(in, out);
  std::vector<double> want;
  for (int r = 0; r < size(); ++r) {
    auto part = make(r, 6, 3, DType::kFloat32).to_doubles();
    want.insert(want.end(), part.begin(), part.end());
  }
  EXPECT_EQ(out.to_doubles(), want);
}

TEST(Collectives, ReduceScatterGivesEachRankItsSlice) {
  const int64_t k = 5;
  NDArray in = make(rank(), k * size(), 4, DType::kFloat64);
  NDArray out = NDArray::empty(Shape{k}, DType::kFloat64);
  reduce_scatter(in, out, ReduceOp::kSum);
  auto got = out.to_doubles();
  for (int64_t i = 0; i < k; ++i) {
    EXPECT_EQ(got[static_cast<size_t>(i)], reference(ReduceOp::kSum, rank() * k + i, 4, false));
  }
}

// Each rank issues the same named collectives in a different order (odd ranks reversed): the
// names match them, and the small ones are fused.
TEST(Collectives, NamedCollectivesInDifferentOrdersAndFusion) {
  const int count = 64;
  std::vector<NDArray> arrays(count);
  std::vector<int> order(count);
  std::iota(order.begin(), order.end(), 0);
  if (rank() % 2 == 1) std::reverse(order.begin(), order.end());
  Stats before = stats();
  for (int j : order) {
    arrays[static_cast<size_t>(j)] = make(rank(), 17 + j, 100 + j, DType::kFloat32);
    allreduce(arrays[static_cast<size_t>(j)], arrays[static_cast<size_t>(j)], ReduceOp::kSum,
              CollectiveOptions{"t" + std::to_string(j), 0});
  }
  for (int j = 0; j < count; ++j)
    expect_reduced(arrays[static_cast<size_t>(j)], ReduceOp::kSum, 100 + j, false);
  Stats after = stats();
  EXPECT_EQ(after.collectives - before.collectives, count);
  if (Options::from_environment().fusion_bytes == 0) {
    // Fusion off (ctest dist_np2_unfused): one transport call per collective, same results.
    EXPECT_EQ(after.transport_calls - before.transport_calls, count);
    EXPECT_EQ(after.fused_batches, before.fused_batches);
  } else if (size() > 1) {
    // Fused batches carry several allreduces: fewer transport calls than collectives.
    EXPECT_LT(after.transport_calls - before.transport_calls, count);
    EXPECT_GT(after.fused_batches, before.fused_batches);
  }
}

// The engine orders a collective with the operations around it: a chain of in-place allreduces
// on one array, and a consumer that reads the result.
TEST(Collectives, OrderedWithEngineOperations) {
  NDArray x = NDArray::ones(Shape{1000});
  for (int i = 0; i < 3; ++i) allreduce(x, x, ReduceOp::kSum, CollectiveOptions{"chain", 0});
  NDArray y = x * 2.0 + 1.0;
  double n = size();
  for (double v : y.to_doubles()) ASSERT_EQ(v, 2 * n * n * n + 1);
}

TEST(Collectives, BarrierAndAutomaticNames) {
  barrier();
  NDArray a = NDArray::full(Shape{3}, rank() + 1.0);
  allreduce(a, a);  // named "allreduce.<n>" by program order on every rank
  double n = size();
  for (double v : a.to_doubles()) EXPECT_EQ(v, n * (n + 1) / 2);
  barrier();
}

TEST(Collectives, BadArgumentsAreRefusedAtPush) {
  NDArray a = NDArray::zeros(Shape{4});
  NDArray b = NDArray::zeros(Shape{5});
  EXPECT_THROW(allreduce(a, b), ShapeError);
  EXPECT_THROW(broadcast(a, size()), ValueError);
  EXPECT_THROW(allgather(a, NDArray::zeros(Shape{4 * size() + 1})), ShapeError);
  EXPECT_THROW(reduce_scatter(a, b), ShapeError);
  EXPECT_THROW(parse_reduce_op("avg"), ValueError);
  NDArray i = NDArray::zeros(Shape{4}, DType::kInt32);
  EXPECT_THROW(allreduce(a, i), ValueError);
}

TEST(Collectives, GradientsAreAveraged) {
  std::vector<std::pair<std::string, NDArray>> grads;
  for (int j = 0; j < 4; ++j)
    grads.emplace_back("w" + std::to_string(j), make(rank(), 10 + j, j, DType::kFloat32));
  allreduce_gradients(grads);
  for (int j = 0; j < 4; ++j)
    expect_reduced(grads[static_cast<size_t>(j)].second, ReduceOp::kMean, j, false, 1e-7);
  std::vector<std::pair<std::string, NDArray>> params{{"p", make(rank(), 8, 9, DType::kFloat32)}};
  broadcast_parameters(params);
  EXPECT_EQ(params[0].second.to_doubles(), make(0, 8, 9, DType::kFloat32).to_doubles());
}

}  // namespace
}  // namespace weft::dist

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  weft::dist::init();
  // Only rank 0 prints; every rank runs every test and mpirun fails if any rank fails.
  if (weft::dist::rank() != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS();
  weft::dist::shutdown();
  return rc;
}
