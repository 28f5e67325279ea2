// Element types: weft's DType enum (numbered like MXNet's type flags, so .params and __dtype__
// map directly) and its conversion to DLPack's DLDataType.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft {

/// An element type. The numeric values are MXNet's type flags (.params files, `__dtype__`);
/// kUnknown marks a type that inference has not determined yet.
enum class DType : int32_t {
  kUnknown = -1,
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,
  kUInt8 = 3,
  kInt32 = 4,
  kInt8 = 5,
  kInt64 = 6,
  kBool = 7,
  kInt16 = 8,
  kUInt16 = 9,
  kUInt32 = 10,
  kUInt64 = 11,
  kBFloat16 = 12,
};

/// DLPack's DLDataType, bit for bit (code, bits, lanes).
struct DLDataTypeCompat {
  uint8_t code = 2;  ///< 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
  uint8_t bits = 32;
  uint16_t lanes = 1;
};

/// Bytes per element; throws ValueError for kUnknown.
size_t dtype_size(DType type);
/// "float32", "int64", ...; "unknown" for kUnknown.
const char* dtype_name(DType type);
/// Parses a NumPy-style name ("float32", "float16", "int8", "bool", ...). Throws ValueError.
DType parse_dtype(const std::string& name);
/// The DType for an MXNet type flag; throws ValueError naming an unsupported flag.
DType dtype_from_flag(int flag);
DLDataTypeCompat to_dlpack(DType type);
/// Throws ValueError for lanes != 1 or an unsupported code/bits pair.
DType from_dlpack(DLDataTypeCompat type);

/// Maps a C++ type to its DType (float → kFloat32, ...).
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kUInt8;
};
template <>
struct DTypeOf<int8_t> {
  static constexpr DType value = DType::kInt8;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
};

}  // namespace weft

/// Calls `body` with `DT` bound to the C++ type of `dtype` for float32/float64/int32/int64/uint8/
/// int8/bool; throws NotImplemented naming `what` for other types.
#define WEFT_DTYPE_SWITCH(dtype, DT, what, ...)                                     \
  switch (dtype) {                                                                  \
    case ::weft::DType::kFloat32: {                                                 \
      using DT = float;                                                             \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    case ::weft::DType::kFloat64: {                                                 \
      using DT = double;                                                            \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    case ::weft::DType::kInt32: {                                                   \
      using DT = int32_t;                                                           \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    case ::weft::DType::kInt64: {                                                   \
      using DT = int64_t;                                                           \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    case ::weft::DType::kUInt8: {                                                   \
      using DT = uint8_t;                                                           \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    case ::weft::DType::kInt8: {                                                    \
      using DT = int8_t;                                                            \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    case ::weft::DType::kBool: {                                                    \
      using DT = bool;                                                              \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    default:                                                                        \
      WEFT_THROW(NotImplemented) << what << ": dtype " << ::weft::dtype_name(dtype) \
                                 << " is not supported";                            \
  }

/// Like WEFT_DTYPE_SWITCH without bool (the arithmetic types).
#define WEFT_ARITH_SWITCH(dtype, DT, what, ...)                                     \
  switch (dtype) {                                                                  \
    case ::weft::DType::kFloat32: {                                                 \
      using DT = float;                                                             \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    case ::weft::DType::kFloat64: {                                                 \
      using DT = double;                                                            \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    case ::weft::DType::kInt32: {                                                   \
      using DT = int32_t;                                                           \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    case ::weft::DType::kInt64: {                                                   \
      using DT = int64_t;                                                           \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    case ::weft::DType::kUInt8: {                                                   \
      using DT = uint8_t;                                                           \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    case ::weft::DType::kInt8: {                                                    \
      using DT = int8_t;                                                            \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    default:                                                                        \
      WEFT_THROW(NotImplemented) << what << ": dtype " << ::weft::dtype_name(dtype) \
                                 << " is not supported";                            \
  }

/// Like WEFT_DTYPE_SWITCH for the floating types only (float32, float64).
#define WEFT_FLOAT_SWITCH(dtype, DT, what, ...)                                     \
  switch (dtype) {                                                                  \
    case ::weft::DType::kFloat32: {                                                 \
      using DT = float;                                                             \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    case ::weft::DType::kFloat64: {                                                 \
      using DT = double;                                                            \
      __VA_ARGS__;                                                                  \
      break;                                                                        \
    }                                                                               \
    default:                                                                        \
      WEFT_THROW(NotImplemented) << what << ": dtype " << ::weft::dtype_name(dtype) \
                                 << " is not supported (float32 and float64 are)";  \
  }
