// The coordinator's message encoding: little-endian fixed-width integers and length-prefixed
// strings, appended to and read from a std::string. Both ends are the same build of weft.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "dist/dist.h"

namespace weft::dist::detail {

class Writer {
 public:
  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  T get() {
    T value;
    need(sizeof(T));
    std::memcpy(&value, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string get_string() {
    auto n = get<uint32_t>();
    need(n);
    std::string s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  void need(size_t n) {
    if (pos_ + n > in_.size()) throw DistError("dist: a truncated coordination message");
  }
  const std::string& in_;
  size_t pos_ = 0;
};

}  // namespace weft::dist::detail
