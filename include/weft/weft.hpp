// weft.hpp: a header-only C++17 wrapper over weft's C ABI (c_api.h), for programs that want the
// ABI's stability (link libweft_c.so only, no weft C++ headers) with RAII and exceptions.
//
//   namespace wa = weft::abi;
//   wa::Array x = wa::Array::from_vector<float>({2, 3}, std::vector<float>(6, 1.f));
//   wa::Array y = wa::invoke1("relu", {x});
//   std::vector<float> v = y.to_vector<float>();
//
// Failures throw weft::abi::Error with weft_last_error()'s message. Everything here is inline.
// The namespace is weft::abi so that a program may also include weft's C++ headers.
#ifndef WEFT_WEFT_HPP_
#define WEFT_WEFT_HPP_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/c_api.h"

namespace weft::abi {

/// A failure reported by the C ABI.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws Error when a C ABI call failed.
inline void check(int rc) {
  if (rc != 0) throw Error(weft_last_error());
}

inline weft_device_t cpu() { return weft_device_t{1, 0}; }
inline weft_device_t cuda(int ordinal) { return weft_device_t{2, ordinal}; }

template <typename T>
struct DTypeCode;
template <>
struct DTypeCode<float> {
  static constexpr int value = WEFT_FLOAT32;
};
template <>
struct DTypeCode<double> {
  static constexpr int value = WEFT_FLOAT64;
};
template <>
struct DTypeCode<int32_t> {
  static constexpr int value = WEFT_INT32;
};
template <>
struct DTypeCode<int64_t> {
  static constexpr int value = WEFT_INT64;
};
template <>
struct DTypeCode<uint8_t> {
  static constexpr int value = WEFT_UINT8;
};

/// An engine variable owned by this object: deleted (after its pending operations) on
/// destruction. Move-only.
class Var {
 public:
  Var() { check(weft_var_new(&var_)); }
  ~Var() {
    if (owned_) weft_var_delete(var_);
  }
  Var(Var&& o) noexcept : var_(o.var_), owned_(std::exchange(o.owned_, false)) {}
  Var& operator=(Var&& o) noexcept {
    if (this != &o) {
      if (owned_) weft_var_delete(var_);
      var_ = o.var_;
      owned_ = std::exchange(o.owned_, false);
    }
    return *this;
  }
  Var(const Var&) = delete;
  Var& operator=(const Var&) = delete;
  weft_var_t get() const { return var_; }
  uint64_t version() const {
    uint64_t v = 0;
    check(weft_var_version(var_, &v));
    return v;
  }
  void wait() const { check(weft_wait_var(var_)); }

 private:
  weft_var_t var_{};
  bool owned_ = true;
};

/// Pushes `fn(const weft_run_context_t&)` reading `reads` and writing `writes`. An exception
/// thrown by `fn` fails the operation (its message reaches the waits), it never unwinds into weft.
template <typename F>
void push(F fn, std::vector<weft_var_t> reads, std::vector<weft_var_t> writes,
          weft_device_t device = cpu(), int priority = 0, const char* name = nullptr) {
  using Fn = std::decay_t<F>;
  auto* user = new Fn(std::move(fn));
  check(weft_push_sync(
      [](const weft_run_context_t* ctx, void* u) -> int {
        try {
          (*static_cast<Fn*>(u))(*ctx);
          return 0;
        } catch (const std::exception& e) {
          return weft_set_error(e.what());
        } catch (...) {
          return weft_set_error("unknown exception");
        }
      },
      user, [](void* u) { delete static_cast<Fn*>(u); }, device, reads.data(), reads.size(),
      writes.data(), writes.size(), priority, name));
}

/// Waits for every operation; throws the first error since the last wait.
inline void wait_all() { check(weft_wait_all()); }

/// An array handle (shares storage on copy, like the C++ NDArray).
class Array {
 public:
  Array() = default;
  /// Takes ownership of a handle from the C ABI.
  explicit Array(weft_array_t h) : h_(h, &release) {}

  static Array zeros(const std::vector<int64_t>& shape, int dtype = WEFT_FLOAT32,
                     weft_device_t device = cpu()) {
    weft_array_t h = nullptr;
    check(weft_array_zeros(shape.data(), static_cast<int>(shape.size()), dtype, device, &h));
    return Array(h);
  }
  template <typename T>
  static Array from_vector(const std::vector<int64_t>& shape, const std::vector<T>& values,
                           weft_device_t device = cpu()) {
    weft_array_t h = nullptr;
    check(weft_array_from_host(values.data(), values.size() * sizeof(T), shape.data(),
                               static_cast<int>(shape.size()), DTypeCode<T>::value, device, &h));
    return Array(h);
  }
  /// Imports a DLPack tensor (ownership passes to weft on success).
  static Array from_dlpack(DLManagedTensor* t) {
    weft_array_t h = nullptr;
    check(weft_array_from_dlpack(t, &h));
    return Array(h);
  }

  weft_array_t get() const { return h_.get(); }
  explicit operator bool() const { return h_ != nullptr; }

  std::vector<int64_t> shape() const {
    const int64_t* s = nullptr;
    int n = 0;
    check(weft_array_shape(get(), &s, &n));
    return std::vector<int64_t>(s, s + n);
  }
  int dtype() const {
    int d = 0;
    check(weft_array_dtype(get(), &d));
    return d;
  }
  weft_var_t var() const {
    weft_var_t v{};
    check(weft_array_var(get(), &v));
    return v;
  }
  void* data() const {
    void* p = nullptr;
    check(weft_array_data(get(), &p));
    return p;
  }
  void wait_to_read() const { check(weft_array_wait_to_read(get())); }
  template <typename T>
  std::vector<T> to_vector() const {
    int64_t n = 1;
    for (int64_t d : shape()) n *= d;
    std::vector<T> out(static_cast<size_t>(n));
    check(weft_array_to_host(get(), out.data(), out.size() * sizeof(T)));
    return out;
  }
  /// Exports as DLPack (the consumer calls the deleter).
  DLManagedTensor* to_dlpack() const {
    DLManagedTensor* t = nullptr;
    check(weft_array_to_dlpack(get(), &t));
    return t;
  }
  void attach_grad(int req = WEFT_GRAD_WRITE) { check(weft_array_attach_grad(get(), req)); }
  Array grad() const {
    weft_array_t h = nullptr;
    check(weft_array_grad(get(), &h));
    return Array(h);
  }
  void backward() const { check(weft_array_backward(get(), nullptr)); }

 private:
  static void release(weft_array_s* h) { weft_array_free(h); }
  std::shared_ptr<weft_array_s> h_;
};

/// Runs an operator; returns its visible outputs.
inline std::vector<Array> invoke(
    const std::string& op, const std::vector<Array>& inputs,
    const std::vector<std::pair<std::string, std::string>>& attrs = {}) {
  std::vector<weft_array_t> in;
  for (const Array& a : inputs) in.push_back(a.get());
  std::vector<const char*> keys, values;
  for (const auto& kv : attrs) {
    keys.push_back(kv.first.c_str());
    values.push_back(kv.second.c_str());
  }
  weft_array_t out[16];
  int n = 16;
  check(weft_invoke(op.c_str(), in.data(), static_cast<int>(in.size()), keys.data(), values.data(),
                    static_cast<int>(keys.size()), out, &n));
  std::vector<Array> result;
  for (int i = 0; i < n; ++i) result.emplace_back(out[i]);
  return result;
}
inline Array invoke1(const std::string& op, const std::vector<Array>& inputs,
                     const std::vector<std::pair<std::string, std::string>>& attrs = {}) {
  return invoke(op, inputs, attrs).at(0);
}

/// Records operations for autograd while alive.
class RecordScope {
 public:
  explicit RecordScope(bool train = true) {
    check(weft_autograd_set_recording(1, &prev_rec_));
    check(weft_autograd_set_training(train ? 1 : 0, &prev_train_));
  }
  ~RecordScope() {
    weft_autograd_set_recording(prev_rec_, nullptr);
    weft_autograd_set_training(prev_train_, nullptr);
  }
  RecordScope(const RecordScope&) = delete;
  RecordScope& operator=(const RecordScope&) = delete;

 private:
  int prev_rec_ = 0;
  int prev_train_ = 0;
};

/// A loaded graph.
class Graph {
 public:
  static Graph load_file(const std::string& path) {
    weft_graph_t g = nullptr;
    check(weft_graph_load_file(path.c_str(), &g));
    return Graph(g);
  }
  static Graph load_json(const std::string& json) {
    weft_graph_t g = nullptr;
    check(weft_graph_load_json(json.data(), json.size(), &g));
    return Graph(g);
  }
  weft_graph_t get() const { return g_.get(); }

 private:
  explicit Graph(weft_graph_t g) : g_(g, [](weft_graph_s* p) { weft_graph_free(p); }) {}
  std::shared_ptr<weft_graph_s> g_;
};

/// A bound graph.
class Executor {
 public:
  Executor(const Graph& graph,
           const std::vector<std::pair<std::string, std::vector<int64_t>>>& input_shapes,
           weft_device_t device = cpu(), int grad_req = WEFT_GRAD_NULL) {
    std::vector<const char*> names;
    std::vector<const int64_t*> shapes;
    std::vector<int> ndims;
    for (const auto& [n, s] : input_shapes) {
      names.push_back(n.c_str());
      shapes.push_back(s.data());
      ndims.push_back(static_cast<int>(s.size()));
    }
    weft_executor_t e = nullptr;
    check(weft_executor_bind(graph.get(), device, names.data(), shapes.data(), ndims.data(),
                             static_cast<int>(names.size()), grad_req, &e));
    e_.reset(e);
  }
  void set_arg(const std::string& name, const Array& value) {
    check(weft_executor_set_arg(e_.get(), name.c_str(), value.get()));
  }
  Array arg(const std::string& name) const {
    weft_array_t h = nullptr;
    check(weft_executor_arg(e_.get(), name.c_str(), &h));
    return Array(h);
  }
  Array grad(const std::string& name) const {
    weft_array_t h = nullptr;
    check(weft_executor_grad(e_.get(), name.c_str(), &h));
    return Array(h);
  }
  void forward(bool is_train = false) { check(weft_executor_forward(e_.get(), is_train ? 1 : 0)); }
  void backward() { check(weft_executor_backward(e_.get(), nullptr, 0)); }
  std::vector<Array> outputs() const {
    int n = 0;
    check(weft_executor_num_outputs(e_.get(), &n));
    std::vector<Array> out;
    for (int i = 0; i < n; ++i) {
      weft_array_t h = nullptr;
      check(weft_executor_output(e_.get(), i, &h));
      out.emplace_back(h);
    }
    return out;
  }

 private:
  struct Free {
    void operator()(weft_executor_s* e) const { weft_executor_free(e); }
  };
  std::unique_ptr<weft_executor_s, Free> e_;
};

/// Loads a plugin library.
inline void load_plugin(const std::string& path) { check(weft_load_plugin(path.c_str())); }

}  // namespace weft::abi

#endif  // WEFT_WEFT_HPP_
