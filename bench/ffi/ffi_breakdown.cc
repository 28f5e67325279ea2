// `weft_ffi_bench --breakdown`: where the C ABI's extra cost per push goes. Native pushes on the
// Runtime's engine that add, one step at a time, what capi/c_api_engine.cc's weft_push_sync does
// around Engine::push_sync (a replica: the steps are timing experiments, not the C ABI's code),
// and the real weft_push_sync last; push_only and drain per step (Note [What the ffi figures
// time] in ffi_bench.cc), ns per op, with the step's increment over the previous one.

#include "bench/ffi/ffi_breakdown.h"

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/small_vector.h"
#include "engine/engine.h"
#include "ndarray/runtime.h"

namespace weft::bench::ffi {
namespace {

// What weft_push_sync's closure owns besides the function pointer (a replica of capi's UserData).
struct UserDataReplica {
  void* user = nullptr;
  weft_free_fn free_user = nullptr;
  UserDataReplica(void* u, weft_free_fn f) : user(u), free_user(f) {}
  UserDataReplica(UserDataReplica&& o) noexcept
      : user(o.user), free_user(std::exchange(o.free_user, nullptr)) {}
  UserDataReplica(const UserDataReplica&) = delete;
  UserDataReplica& operator=(const UserDataReplica&) = delete;
  UserDataReplica& operator=(UserDataReplica&&) = delete;
  ~UserDataReplica() {
    if (free_user != nullptr) free_user(user);
  }
};

thread_local const weft_run_context_t* t_current_replica = nullptr;

int noop(const weft_run_context_t* /*ctx*/, void* /*user*/) { return 0; }

weft_var_t to_c(VarHandle h) {
  weft_var_t v;
  static_assert(sizeof v == sizeof h);
  std::memcpy(&v, &h, sizeof v);
  return v;
}
VarHandle from_c(weft_var_t v) {
  VarHandle h;
  std::memcpy(static_cast<void*>(&h), &v, sizeof h);
  return h;
}

using VarVector = SmallVector<VarHandle, 8>;
VarVector var_list_replica(const weft_var_t* vars, size_t n) {
  if (n != 0 && vars == nullptr) throw std::runtime_error("NULL list");
  VarVector out;
  out.resize(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = from_c(vars[i]);
    if (!out[i]) throw std::runtime_error("null var");
  }
  return out;
}

// The closure of steps 2 and later: the C function and its user data.
auto make_closure(weft_sync_fn fn, bool with_scope) {
  return [fn, data = UserDataReplica(nullptr, nullptr), with_scope](const RunContext& rc) {
    const weft_run_context_t ctx{weft_device_t{static_cast<int32_t>(rc.device.type), rc.device.id},
                                 rc.stream.handle, rc.worker};
    if (with_scope) {
      const weft_run_context_t* previous = t_current_replica;
      t_current_replica = &ctx;
      const int rc_fn = fn(&ctx, data.user);
      t_current_replica = previous;
      if (rc_fn != 0) throw std::runtime_error("foreign operation failed");
    } else {
      fn(&ctx, data.user);
    }
  };
}

// What the suggested weft_push_sync would do (docs/PERFORMANCE.md, "C ABI (ffi)"): validate the C
// list and copy it into plain stack storage (no SmallVector), take the CPU device on a fast path,
// no default name, and a trivially copyable closure when there is no user-data destructor.
void push_suggested(weft_sync_fn fn, void* user, weft_free_fn free_user, weft_device_t device,
                    const weft_var_t* writes, size_t num_writes) {
  if (fn == nullptr) throw std::runtime_error("fn is NULL");
  const Device dev =
      device.type == 1 && device.id == 0 ? Device::cpu() : throw std::runtime_error("device");
  VarHandle w[4];
  if (num_writes > 4 || (num_writes != 0 && writes == nullptr)) throw std::runtime_error("writes");
  for (size_t i = 0; i < num_writes; ++i) {
    w[i] = from_c(writes[i]);
    if (!w[i]) throw std::runtime_error("null var");
  }
  Engine& engine = Runtime::get().engine();
  const std::span<const VarHandle> ws(w, num_writes);
  if (free_user == nullptr) {
    engine.push_sync(
        [fn, user](const RunContext& rc) {
          const weft_run_context_t ctx{
              weft_device_t{static_cast<int32_t>(rc.device.type), rc.device.id}, rc.stream.handle,
              rc.worker};
          const weft_run_context_t* previous = t_current_replica;
          t_current_replica = &ctx;
          const int rc_fn = fn(&ctx, user);
          t_current_replica = previous;
          if (rc_fn != 0) throw std::runtime_error("foreign operation failed");
        },
        dev, {}, ws);
  } else {
    engine.push_sync(make_closure(fn, true), dev, {}, ws);
  }
}

struct Step {
  const char* name;
  std::function<void(Engine&, const weft_var_t*)> push;  // pushes one op writing *var
};

std::vector<Step> steps() {
  std::vector<Step> s;
  s.push_back({"0 native: empty lambda, no name", [](Engine& e, const weft_var_t* v) {
                 e.push_sync([](const RunContext&) {}, Device::cpu(), {}, {from_c(*v)});
               }});
  s.push_back({"1 + name \"foreign\" (OpName copy)", [](Engine& e, const weft_var_t* v) {
                 e.push_sync([](const RunContext&) {}, Device::cpu(), {}, {from_c(*v)},
                             FnProperty::kNormal, 0, "foreign");
               }});
  s.push_back({"2 + closure {fn, UserData}, C call", [](Engine& e, const weft_var_t* v) {
                 e.push_sync(make_closure(&noop, false), Device::cpu(), {}, {from_c(*v)},
                             FnProperty::kNormal, 0, "foreign");
               }});
  s.push_back({"3 + context scope, rc check", [](Engine& e, const weft_var_t* v) {
                 e.push_sync(make_closure(&noop, true), Device::cpu(), {}, {from_c(*v)},
                             FnProperty::kNormal, 0, "foreign");
               }});
  s.push_back({"4 + var_list x2 (SmallVector)", [](Engine& e, const weft_var_t* v) {
                 VarVector r = var_list_replica(nullptr, 0);
                 VarVector w = var_list_replica(v, 1);
                 e.push_sync(make_closure(&noop, true), Device::cpu(),
                             std::span<const VarHandle>(r.data(), r.size()),
                             std::span<const VarHandle>(w.data(), w.size()), FnProperty::kNormal, 0,
                             "foreign");
               }});
  s.push_back({"5 + Runtime::get() per push", [](Engine&, const weft_var_t* v) {
                 VarVector r = var_list_replica(nullptr, 0);
                 VarVector w = var_list_replica(v, 1);
                 Runtime::get().engine().push_sync(make_closure(&noop, true), Device::cpu(),
                                                   std::span<const VarHandle>(r.data(), r.size()),
                                                   std::span<const VarHandle>(w.data(), w.size()),
                                                   FnProperty::kNormal, 0, "foreign");
               }});
  s.push_back({"6 weft_push_sync (the C ABI)", [](Engine&, const weft_var_t* v) {
                 const int rc = weft_push_sync(&noop, nullptr, nullptr, weft_device_t{1, 0},
                                               nullptr, 0, v, 1, 0, nullptr);
                 if (rc != 0) check_rc(rc, "weft_push_sync");
               }});
  s.push_back({"7 replica with the suggested fixes", [](Engine&, const weft_var_t* v) {
                 push_suggested(&noop, nullptr, nullptr, weft_device_t{1, 0}, v, 1);
               }});
  return s;
}

}  // namespace

int run_breakdown(const Sizes& sizes, int workers) {
  Engine& engine = Runtime::get().engine();
  const std::vector<Step> all = steps();
  std::vector<weft_var_t> vars;
  vars.reserve(static_cast<size_t>(sizes.ops) + 1);
  for (int64_t i = 0; i <= sizes.ops; ++i) vars.push_back(to_c(engine.new_var()));
  WorkerGate gate(workers);
  std::printf(
      "# breakdown: %lld ops per batch, reps=%d, workers held during pushes; ns per op "
      "(median), +x = increment over the previous step (median of per-rep differences)\n",
      static_cast<long long>(sizes.ops), sizes.reps);
  // [pattern][step][figure: push, drain] per rep.
  std::vector<std::vector<double>> push_ns[2], drain_ns[2];
  for (int p = 0; p < 2; ++p) {
    push_ns[p].assign(all.size(), {});
    drain_ns[p].assign(all.size(), {});
  }
  for (int r = -1; r < sizes.reps; ++r) {
    for (Pattern pattern : {Pattern::kChain, Pattern::kIndependent}) {
      const int p = static_cast<int>(pattern);
      for (size_t k = 0; k < all.size(); ++k) {
        // Alternate the order of the steps between repetitions (drift affects all alike).
        const size_t step = r % 2 == 0 ? k : all.size() - 1 - k;
        const BatchTime t = time_batch(
            sizes.ops, &gate,
            [&](int64_t i) {
              all[step].push(engine, pattern == Pattern::kChain ? &vars[0] : &vars[i + 1]);
            },
            [&] { engine.wait_for_all(); });
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        if (r < 0) continue;
        push_ns[p][step].push_back(t.push_ns / static_cast<double>(sizes.ops));
        drain_ns[p][step].push_back(t.drain_ns / static_cast<double>(sizes.ops));
      }
    }
  }
  for (Pattern pattern : {Pattern::kChain, Pattern::kIndependent}) {
    const int p = static_cast<int>(pattern);
    for (size_t k = 0; k < all.size(); ++k) {
      std::string inc_push = "", inc_drain = "";
      if (k > 0) {
        std::vector<double> dp, dd;
        for (size_t r = 0; r < push_ns[p][k].size(); ++r) {
          dp.push_back(push_ns[p][k][r] - push_ns[p][k - 1][r]);
          dd.push_back(drain_ns[p][k][r] - drain_ns[p][k - 1][r]);
        }
        char buf[96];
        std::snprintf(buf, sizeof buf, " (%+.1f)", summarize(dp).median);
        inc_push = buf;
        std::snprintf(buf, sizeof buf, " (%+.1f)", summarize(dd).median);
        inc_drain = buf;
      }
      std::printf("# breakdown %-11s %-38s push_only=%6.1f%-9s drain=%6.1f%s\n",
                  pattern_name(pattern), all[k].name, summarize(push_ns[p][k]).median,
                  inc_push.c_str(), summarize(drain_ns[p][k]).median, inc_drain.c_str());
    }
  }
  engine.wait_for_all();
  for (weft_var_t v : vars) engine.delete_var(from_c(v));
  std::fflush(stdout);
  return 0;
}

}  // namespace weft::bench::ffi
