// DType sizes, names and DLPack conversion.
#include "base/dtype.h"

#include "base/error.h"

namespace weft {

size_t dtype_size(DType type) {
  switch (type) {
    case DType::kFloat32:
    case DType::kInt32:
    case DType::kUInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
    case DType::kUInt64:
      return 8;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
    case DType::kUInt16:
      return 2;
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kBool:
      return 1;
    case DType::kUnknown:
      break;
  }
  WEFT_THROW(ValueError) << "dtype_size: unknown dtype (" << static_cast<int>(type) << ")";
}

const char* dtype_name(DType type) {
  switch (type) {
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kUInt16:
      return "uint16";
    case DType::kInt32:
      return "int32";
    case DType::kUInt32:
      return "uint32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt64:
      return "uint64";
    case DType::kBool:
      return "bool";
    case DType::kUnknown:
      return "unknown";
  }
  return "invalid";
}

DType parse_dtype(const std::string& name) {
  static const DType kAll[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                               DType::kUInt8,   DType::kInt8,    DType::kInt16,   DType::kUInt16,
                               DType::kInt32,   DType::kUInt32,  DType::kInt64,   DType::kUInt64,
                               DType::kBool};
  for (DType t : kAll) {
    if (name == dtype_name(t)) return t;
  }
  if (name == "float") return DType::kFloat32;
  if (name == "double") return DType::kFloat64;
  if (name == "half") return DType::kFloat16;
  WEFT_THROW(ValueError) << "unknown dtype '" << name
                         << "' (expected float32, float64, float16, bfloat16, int8, int32, int64, "
                            "uint8, bool, ...)";
}

DType dtype_from_flag(int flag) {
  WEFT_CHECK(flag >= 0 && flag <= 12) << "unsupported MXNet type flag " << flag;
  return static_cast<DType>(flag);
}

DLDataTypeCompat to_dlpack(DType type) {
  const uint8_t bits = static_cast<uint8_t>(dtype_size(type) * 8);
  switch (type) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kFloat16:
      return {2, bits, 1};
    case DType::kBFloat16:
      return {4, 16, 1};
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      return {0, bits, 1};
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
      return {1, bits, 1};
    case DType::kBool:
      return {6, 8, 1};
    case DType::kUnknown:
      break;
  }
  WEFT_THROW(ValueError) << "to_dlpack: unknown dtype";
}

DType from_dlpack(DLDataTypeCompat t) {
  WEFT_CHECK(t.lanes == 1) << "DLPack dtype with " << t.lanes << " lanes is not supported";
  switch (t.code) {
    case 2:
      if (t.bits == 32) return DType::kFloat32;
      if (t.bits == 64) return DType::kFloat64;
      if (t.bits == 16) return DType::kFloat16;
      break;
    case 4:
      if (t.bits == 16) return DType::kBFloat16;
      break;
    case 0:
      if (t.bits == 8) return DType::kInt8;
      if (t.bits == 16) return DType::kInt16;
      if (t.bits == 32) return DType::kInt32;
      if (t.bits == 64) return DType::kInt64;
      break;
    case 1:
      if (t.bits == 8) return DType::kUInt8;
      if (t.bits == 16) return DType::kUInt16;
      if (t.bits == 32) return DType::kUInt32;
      if (t.bits == 64) return DType::kUInt64;
      break;
    case 6:
      if (t.bits == 8) return DType::kBool;
      break;
  }
  WEFT_THROW(ValueError) << "unsupported DLPack dtype (code " << int(t.code) << ", bits "
                         << int(t.bits) << ")";
}

}  // namespace weft
