// A move-only type-erased callable with inline storage: an operation's function is stored
// without a heap allocation when its captures fit (the common case on the push hot path).
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace weft::detail {

template <typename Signature, size_t kCapacity = 48>
class InlineFunction;

/// Like std::function, but move-only and with `kCapacity` bytes of inline storage (std::function
/// in libstdc++ keeps only 16). Larger callables go to the heap. Not thread-safe: one owner.
template <typename R, typename... Args, size_t kCapacity>
class InlineFunction<R(Args...), kCapacity> {
 public:
  InlineFunction() = default;
  InlineFunction(std::nullptr_t) {}  // NOLINT(google-explicit-constructor)

  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, InlineFunction> &&
                                        std::is_invocable_r_v<R, D&, Args...>>>
  InlineFunction(F&& f) {  // NOLINT(google-explicit-constructor)
    if constexpr (fits_inline<D>()) {
      ::new (static_cast<void*>(storage_)) D(std::forward<F>(f));
      invoke_ = [](void* s, Args&&... args) -> R {
        return (*std::launder(static_cast<D*>(s)))(std::forward<Args>(args)...);
      };
      manage_ = [](void* dst, void* src) {
        D* from = std::launder(static_cast<D*>(src));
        if (dst != nullptr) ::new (dst) D(std::move(*from));
        from->~D();
      };
    } else {
      *reinterpret_cast<D**>(storage_) = new D(std::forward<F>(f));
      invoke_ = [](void* s, Args&&... args) -> R {
        return (**static_cast<D**>(s))(std::forward<Args>(args)...);
      };
      manage_ = [](void* dst, void* src) {
        D** from = static_cast<D**>(src);
        if (dst != nullptr) {
          *static_cast<D**>(dst) = *from;
        } else {
          delete *from;
        }
        *from = nullptr;
      };
    }
  }

  InlineFunction(InlineFunction&& other) noexcept { move_from(other); }
  InlineFunction& operator=(InlineFunction&& other) noexcept {
    if (this != &other) {
      reset();
      move_from(other);
    }
    return *this;
  }
  InlineFunction(const InlineFunction&) = delete;
  InlineFunction& operator=(const InlineFunction&) = delete;
  ~InlineFunction() { reset(); }

  explicit operator bool() const { return invoke_ != nullptr; }

  R operator()(Args... args) { return invoke_(storage_, std::forward<Args>(args)...); }

  /// Destroys the held callable (and its captures) now.
  void reset() {
    if (manage_ != nullptr) manage_(nullptr, storage_);
    invoke_ = nullptr;
    manage_ = nullptr;
  }

 private:
  template <typename D>
  static constexpr bool fits_inline() {
    return sizeof(D) <= kCapacity && alignof(D) <= alignof(std::max_align_t) &&
           std::is_nothrow_move_constructible_v<D>;
  }

  void move_from(InlineFunction& other) {
    if (other.manage_ != nullptr) other.manage_(storage_, other.storage_);
    invoke_ = other.invoke_;
    manage_ = other.manage_;
    other.invoke_ = nullptr;
    other.manage_ = nullptr;
  }

  alignas(std::max_align_t) unsigned char storage_[kCapacity];
  R (*invoke_)(void*, Args&&...) = nullptr;
  void (*manage_)(void* dst, void* src) = nullptr;  // dst != null: move into dst; then destroy src
};

}  // namespace weft::detail
