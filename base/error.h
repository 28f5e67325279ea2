// Error types and the three levels of checks (WEFT_CHECK, WEFT_ICHECK, WEFT_DCHECK).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace weft {

/// Base class of every error weft throws. Carries a human-readable message that names what was
/// wrong and where. Thread-safe to copy and read.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// A value (attribute, argument, configuration) the caller supplied is invalid.
class ValueError : public Error {
 public:
  using Error::Error;
};

/// Shapes or dtypes do not agree.
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// A device or pool could not provide the requested memory.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

/// The requested feature is not available in this build or on this device.
class NotImplemented : public Error {
 public:
  using Error::Error;
};

/// An internal invariant of weft does not hold: a bug in weft, not in the caller's code.
class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {

/// Builds an error message with operator<< and throws it as ErrorT when destroyed at the end of a
/// failed check. Only ever constructed on the failure path.
template <typename ErrorT>
class ErrorBuilder {
 public:
  ErrorBuilder(const char* file, int line, const char* condition) {
    if (condition != nullptr) stream_ << "check failed: " << condition << ": ";
    file_ = file;
    line_ = line;
  }
  template <typename T>
  ErrorBuilder& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }
  [[noreturn]] void raise() {
    stream_ << " [" << file_ << ":" << line_ << "]";
    throw ErrorT(stream_.str());
  }

 private:
  std::ostringstream stream_;
  const char* file_;
  int line_;
};

/// Lets `WEFT_CHECK(c) << "msg"` throw after the message is complete.
struct ErrorRaiser {
  template <typename ErrorT>
  [[noreturn]] void operator&(ErrorBuilder<ErrorT>& builder) {
    builder.raise();
  }
  template <typename ErrorT>
  [[noreturn]] void operator&(ErrorBuilder<ErrorT>&& builder) {
    builder.raise();
  }
};

}  // namespace detail
}  // namespace weft

/// Checks a condition the caller is responsible for; always on. Throws ErrorT with the streamed
/// message: `WEFT_CHECK_AS(ValueError, n > 0) << "op 'x': n must be positive, got " << n;`
#define WEFT_CHECK_AS(ErrorT, cond)    \
  if (__builtin_expect(!!(cond), 1)) { \
  } else                               \
    ::weft::detail::ErrorRaiser() &    \
        ::weft::detail::ErrorBuilder<::weft::ErrorT>(__FILE__, __LINE__, #cond)

/// Checks a caller's mistake; always on; throws weft::ValueError.
#define WEFT_CHECK(cond) WEFT_CHECK_AS(ValueError, cond)

/// Checks weft's own invariant; always on; throws weft::InternalError.
#define WEFT_ICHECK(cond) WEFT_CHECK_AS(InternalError, cond)

/// Costly debug-only invariant check (compiled out with NDEBUG).
#ifdef NDEBUG
#define WEFT_DCHECK(cond) \
  while (false) WEFT_ICHECK(cond)
#else
#define WEFT_DCHECK(cond) WEFT_ICHECK(cond)
#endif

/// Throws ErrorT unconditionally with the streamed message.
#define WEFT_THROW(ErrorT)        \
  ::weft::detail::ErrorRaiser() & \
      ::weft::detail::ErrorBuilder<::weft::ErrorT>(__FILE__, __LINE__, nullptr)
