// Operator benchmark: weft's asynchronous NDArray operators against libtorch in the same process,
// on the same machine and thread budget. Prints one `compare` line per workload.
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "ndarray/autograd.h"
#include "ndarray/ndarray.h"
#include "ndarray/ops.h"
#include "ndarray/runtime.h"

namespace {

using weft::NDArray;
using weft::Shape;
using weft::bench::Clock;

// Median of `reps` timings of fn(), each in the unit `scale` ns (1e6 = ms).
double time_median(int reps, const std::function<void()>& fn, double scale) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    auto start = Clock::now();
    fn();
    t.push_back(weft::bench::elapsed_ns(start, Clock::now()) / scale);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void report(const std::string& name, double weft_t, double torch_t, const char* unit) {
  std::printf("compare %s weft=%.4g torch=%.4g ratio=%.3f  # %s\n", name.c_str(), weft_t, torch_t,
              weft_t / torch_t, unit);
  std::fflush(stdout);
}

NDArray from_torch(const torch::Tensor& t) {
  auto c = t.contiguous();
  std::vector<int64_t> dims(c.sizes().begin(), c.sizes().end());
  return NDArray::from_host(c.data_ptr<float>(), Shape(dims), weft::DType::kFloat32);
}

// 1-element adds issued back to back, then one wait: the per-operation overhead.
void tiny_add(int64_t count) {
  auto a = NDArray::full(Shape{1}, 1.0f);
  auto b = NDArray::full(Shape{1}, 2.0f);
  weft::waitall();
  auto run_weft = [&] {
    NDArray c;
    for (int64_t i = 0; i < count; ++i) c = a + b;
    c.wait_to_read();
  };
  auto ta = torch::ones({1});
  auto tb = torch::ones({1});
  auto run_torch = [&] {
    torch::Tensor c;
    for (int64_t i = 0; i < count; ++i) c = ta + tb;
  };
  run_weft();
  run_torch();
  double w = time_median(3, run_weft, 1.0) / count;
  double t = time_median(3, run_torch, 1.0) / count;
  report("tiny_add", w / 1000.0, t / 1000.0, "us per op, 1-element add");
}

void matmul(int n, int reps) {
  auto ta = torch::randn({n, n});
  auto tb = torch::randn({n, n});
  auto a = from_torch(ta), b = from_torch(tb);
  auto run_weft = [&] { weft::op::dot(a, b).wait_to_read(); };
  auto run_torch = [&] { auto c = torch::mm(ta, tb); };
  run_weft();
  run_torch();
  report("matmul_" + std::to_string(n), time_median(reps, run_weft, 1e6),
         time_median(reps, run_torch, 1e6), "ms, float32");
}

void conv3x3(int reps) {
  auto tx = torch::randn({1, 64, 56, 56});
  auto tw = torch::randn({64, 64, 3, 3});
  auto x = from_torch(tx), w = from_torch(tw);
  auto run_weft = [&] {
    weft::op::convolution(x, w, NDArray(), Shape{3, 3}, 64, Shape{1, 1}, Shape{1, 1})
        .wait_to_read();
  };
  auto run_torch = [&] { auto y = torch::conv2d(tx, tw, {}, 1, 1); };
  run_weft();
  run_torch();
  report("conv3x3_64_56", time_median(reps, run_weft, 1e6), time_median(reps, run_torch, 1e6),
         "ms");
}

void conv_bn_relu(int batch, int reps) {
  torch::NoGradGuard no_grad;
  auto tx = torch::randn({batch, 64, 56, 56});
  auto tw = torch::randn({64, 64, 3, 3});
  auto tg = torch::rand({64}) + 0.5, tb = torch::randn({64}), tm = torch::randn({64}) * 0.1,
       tv = torch::rand({64}) + 0.5;
  auto x = from_torch(tx), w = from_torch(tw), g = from_torch(tg), b = from_torch(tb),
       m = from_torch(tm), v = from_torch(tv);
  auto run_weft = [&] {
    NDArray y = weft::op::convolution(x, w, NDArray(), Shape{3, 3}, 64, Shape{1, 1}, Shape{1, 1});
    y = weft::op::batch_norm(y, g, b, m, v, 1e-5, 0.9, false);
    weft::op::relu(y).wait_to_read();
  };
  auto run_torch = [&] {
    auto y = torch::conv2d(tx, tw, {}, 1, 1);
    y = torch::batch_norm(y, tg, tb, tm, tv, false, 0.1, 1e-5, false);
    y = torch::relu(y);
  };
  run_weft();
  run_torch();
  report("conv_bn_relu_b" + std::to_string(batch), time_median(reps, run_weft, 1e6),
         time_median(reps, run_torch, 1e6), "ms, inference");
}

// One SGD step of a 784-512-512-10 MLP with softmax cross-entropy at batch 64.
void mlp_step(int reps) {
  const int batch = 64;
  auto tx = torch::randn({batch, 784});
  auto tlabel = torch::randint(0, 10, {batch}, torch::kLong);
  std::vector<torch::Tensor> tp{torch::randn({512, 784}) * 0.03, torch::zeros({512}),
                                torch::randn({512, 512}) * 0.04, torch::zeros({512}),
                                torch::randn({10, 512}) * 0.04,  torch::zeros({10})};
  for (auto& p : tp) p.set_requires_grad(true);
  auto x = from_torch(tx);
  auto label = from_torch(tlabel.to(torch::kFloat));
  std::vector<NDArray> wp;
  for (auto& p : tp) wp.push_back(from_torch(p.detach()));
  for (auto& p : wp) p.attach_grad();
  const double lr = 0.01;
  auto run_weft = [&] {
    NDArray out;
    {
      weft::autograd::RecordScope record;
      NDArray h = weft::op::relu(weft::op::fully_connected(x, wp[0], wp[1], 512));
      h = weft::op::relu(weft::op::fully_connected(h, wp[2], wp[3], 512));
      out = weft::op::softmax_output(weft::op::fully_connected(h, wp[4], wp[5], 10), label);
    }
    out.backward();
    for (auto& p : wp) p -= p.grad() * lr;
    weft::waitall();
  };
  auto run_torch = [&] {
    auto h = torch::relu(torch::linear(tx, tp[0], tp[1]));
    h = torch::relu(torch::linear(h, tp[2], tp[3]));
    auto loss = torch::nn::functional::cross_entropy(
        torch::linear(h, tp[4], tp[5]), tlabel,
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
    loss.backward();
    torch::NoGradGuard no_grad;
    for (auto& p : tp) {
      p.sub_(p.grad() * lr);
      p.grad().zero_();
    }
  };
  run_weft();
  run_torch();
  report("mlp_train_step_b64", time_median(reps, run_weft, 1e6), time_median(reps, run_torch, 1e6),
         "ms, 784-512-512-10 SGD step");
}

// Intra-op threading against the engine's workers: one large matmul alone, and 8 independent
// matmuls pushed together, under the adaptive policy and under fixed thread counts. Reports
// weft only (the policies are weft's); printed as `threads ...` lines.
void threading(int reps) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  struct Policy {
    const char* name;
    weft::IntraOpPolicy policy;
    int threads;
  };
  const Policy policies[] = {{"adaptive", weft::IntraOpPolicy::kAdaptive, 0},
                             {"fixed1", weft::IntraOpPolicy::kFixed, 1},
                             {"fixed_all", weft::IntraOpPolicy::kFixed, cores}};
  for (const Policy& p : policies) {
    weft::RuntimeConfig config;
    config.intra_op_policy = p.policy;
    config.intra_op_threads = p.threads;
    weft::Runtime::reset(config);
    auto a = NDArray::uniform(Shape{768, 768});
    auto b = NDArray::uniform(Shape{768, 768});
    weft::waitall();
    auto one = [&] { weft::op::dot(a, b).wait_to_read(); };
    auto eight = [&] {
      std::vector<NDArray> outs;
      for (int i = 0; i < 8; ++i) outs.push_back(weft::op::dot(a, b));
      weft::waitall();
    };
    one();
    eight();
    std::printf("threads policy=%s one_matmul_ms=%.3f eight_independent_ms=%.3f\n", p.name,
                time_median(reps, one, 1e6), time_median(reps, eight, 1e6));
    std::fflush(stdout);
  }
  weft::Runtime::reset(weft::RuntimeConfig{});
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"weft operator benchmark against libtorch"};
  bool quick = false;
  int threads = 0;
  std::string only;
  app.add_flag("--quick", quick, "fewer repetitions and a smaller tiny-op count (CI)");
  app.add_option("--threads", threads, "libtorch intra-op threads (default: all cores)");
  app.add_option("--only", only, "run only workloads whose name contains this");
  CLI11_PARSE(app, argc, argv);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(threads > 0 ? threads : cores);
  std::printf("# weft ops benchmark, %s, %s\n", weft::bench::utc_now().c_str(),
              weft::bench::describe_machine().c_str());
  std::printf(
      "# peer: libtorch %s, %d intra-op threads; weft: %d engine workers, adaptive intra-op "
      "threads\n",
      TORCH_VERSION, torch::get_num_threads(),
      weft::Runtime::get().engine().num_workers(weft::Device::cpu()));
  const int reps = quick ? 3 : 11;
  auto want = [&](const char* name) {
    return only.empty() || std::string(name).find(only) != std::string::npos;
  };
  if (want("tiny_add")) tiny_add(quick ? 100000 : 1000000);
  if (want("matmul")) matmul(1024, reps);
  if (want("conv3x3")) conv3x3(reps);
  if (want("conv_bn_relu")) {
    conv_bn_relu(1, reps);
    conv_bn_relu(32, quick ? 2 : 5);
  }
  if (want("mlp")) mlp_step(reps);
  if (want("threads")) threading(reps);
  return 0;
}
