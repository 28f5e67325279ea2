// The C++ surface of the operator set for NDArrays: arithmetic operators and one free function
// per common op, all asynchronous (they push work and return). `invoke(name, inputs, attrs)`
// reaches every registered op, including those without a function here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ndarray/ndarray.h"

namespace weft {

// ---- arithmetic (identical shapes use elemwise_*, different shapes broadcast_*) -----------------
NDArray operator+(const NDArray& a, const NDArray& b);
NDArray operator-(const NDArray& a, const NDArray& b);
NDArray operator*(const NDArray& a, const NDArray& b);
NDArray operator/(const NDArray& a, const NDArray& b);
NDArray operator+(const NDArray& a, double s);
NDArray operator-(const NDArray& a, double s);
NDArray operator*(const NDArray& a, double s);
NDArray operator/(const NDArray& a, double s);
NDArray operator+(double s, const NDArray& a);
NDArray operator-(double s, const NDArray& a);
NDArray operator*(double s, const NDArray& a);
NDArray operator/(double s, const NDArray& a);
NDArray operator-(const NDArray& a);

namespace op {

NDArray add(const NDArray& a, const NDArray& b);
NDArray subtract(const NDArray& a, const NDArray& b);
NDArray multiply(const NDArray& a, const NDArray& b);
NDArray divide(const NDArray& a, const NDArray& b);
NDArray power(const NDArray& a, const NDArray& b);
NDArray maximum(const NDArray& a, const NDArray& b);
NDArray minimum(const NDArray& a, const NDArray& b);
NDArray add_n(const std::vector<NDArray>& arrays);

NDArray relu(const NDArray& x);
NDArray sigmoid(const NDArray& x);
NDArray tanh(const NDArray& x);
NDArray exp(const NDArray& x);
NDArray log(const NDArray& x);
NDArray sqrt(const NDArray& x);
NDArray square(const NDArray& x);
NDArray abs(const NDArray& x);
NDArray negative(const NDArray& x);
NDArray reciprocal(const NDArray& x);
NDArray sin(const NDArray& x);
NDArray cos(const NDArray& x);
NDArray clip(const NDArray& x, double a_min, double a_max);
NDArray where(const NDArray& condition, const NDArray& x, const NDArray& y);
NDArray cast(const NDArray& x, DType dtype);
NDArray stop_gradient(const NDArray& x);

/// Reductions; `axis` empty = all axes.
NDArray sum(const NDArray& x, const std::vector<int>& axis = {}, bool keepdims = false);
NDArray mean(const NDArray& x, const std::vector<int>& axis = {}, bool keepdims = false);
NDArray max(const NDArray& x, const std::vector<int>& axis = {}, bool keepdims = false);
NDArray min(const NDArray& x, const std::vector<int>& axis = {}, bool keepdims = false);
NDArray argmax(const NDArray& x, int axis, bool keepdims = false);

NDArray dot(const NDArray& a, const NDArray& b, bool transpose_a = false, bool transpose_b = false);
NDArray batch_dot(const NDArray& a, const NDArray& b, bool transpose_a = false,
                  bool transpose_b = false);

/// Reshape with MXNet's special codes (0, -1, -2, -3, -4).
NDArray reshape(const NDArray& x, const Shape& shape, bool reverse = false);
NDArray flatten(const NDArray& x);
NDArray transpose(const NDArray& x, const Shape& axes = Shape{});
NDArray expand_dims(const NDArray& x, int axis);
NDArray concat(const std::vector<NDArray>& arrays, int dim = 1);
NDArray stack(const std::vector<NDArray>& arrays, int axis = 0);
std::vector<NDArray> split(const NDArray& x, int num_outputs, int axis = 1,
                           bool squeeze_axis = false);
NDArray slice_axis(const NDArray& x, int axis, int64_t begin, std::optional<int64_t> end);
NDArray broadcast_to(const NDArray& x, const Shape& shape);

/// y = x·Wᵀ + b (b may be none).
NDArray fully_connected(const NDArray& x, const NDArray& weight, const NDArray& bias,
                        int num_hidden, bool flatten = true);
/// 2-D convolution with symmetric padding.
NDArray convolution(const NDArray& x, const NDArray& weight, const NDArray& bias,
                    const Shape& kernel, int num_filter, const Shape& stride = Shape{},
                    const Shape& pad = Shape{}, const Shape& dilate = Shape{}, int num_group = 1);
NDArray pooling(const NDArray& x, const Shape& kernel, const std::string& pool_type = "max",
                const Shape& stride = Shape{}, const Shape& pad = Shape{},
                bool global_pool = false);
/// Returns (out, mean, var) in training, out alone in inference unless output_mean_var.
NDArray batch_norm(const NDArray& x, const NDArray& gamma, const NDArray& beta,
                   NDArray& moving_mean, NDArray& moving_var, double eps = 1e-3,
                   double momentum = 0.9, bool fix_gamma = true);
NDArray activation(const NDArray& x, const std::string& act_type);
NDArray softmax(const NDArray& x, int axis = -1);
NDArray log_softmax(const NDArray& x, int axis = -1);
NDArray dropout(const NDArray& x, double p = 0.5);
NDArray softmax_output(const NDArray& x, const NDArray& label);

}  // namespace op
}  // namespace weft
