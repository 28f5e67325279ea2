// Encoding, comparison and description of collectives (meta.h).
#include "dist/meta.h"

#include <sstream>
#include <type_traits>

namespace weft::dist::detail {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kAllreduce:
      return "allreduce";
    case Kind::kBroadcast:
      return "broadcast";
    case Kind::kAllgather:
      return "allgather";
    case Kind::kReduceScatter:
      return "reduce_scatter";
    case Kind::kBarrier:
      return "barrier";
  }
  return "?";
}

void put_meta(Writer& w, const Meta& m) {
  w.put_string(m.key);
  w.put<uint8_t>(static_cast<uint8_t>(m.kind));
  w.put<int32_t>(static_cast<int32_t>(m.dtype));
  w.put<uint8_t>(static_cast<uint8_t>(m.op));
  w.put<int32_t>(m.root);
  w.put<int32_t>(m.priority);
  w.put<uint8_t>(m.gpu ? 1 : 0);
  w.put<uint32_t>(static_cast<uint32_t>(m.shape.size()));
  for (int64_t d : m.shape) w.put<int64_t>(d);
}

Meta get_meta(Reader& r) {
  Meta m;
  m.key = r.get_string();
  m.kind = static_cast<Kind>(r.get<uint8_t>());
  m.dtype = static_cast<DType>(r.get<int32_t>());
  m.op = static_cast<ReduceOp>(r.get<uint8_t>());
  m.root = r.get<int32_t>();
  m.priority = r.get<int32_t>();
  m.gpu = r.get<uint8_t>() != 0;
  m.shape.resize(r.get<uint32_t>());
  for (auto& d : m.shape) d = r.get<int64_t>();
  return m;
}

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

template <typename T>
void divide(void* data, size_t count, int size) {
  T* p = static_cast<T*>(data);
  if constexpr (std::is_floating_point_v<T>) {
    const T scale = T(1) / static_cast<T>(size);
    for (size_t i = 0; i < count; ++i) p[i] *= scale;
  } else {
    for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(size));
  }
}

}  // namespace

std::string describe(const Meta& m) {
  auto hash = m.key.rfind('#');
  std::ostringstream os;
  os << kind_name(m.kind) << " '" << m.key.substr(0, hash) << "'";
  if (hash != std::string::npos) os << " (use " << m.key.substr(hash + 1) << ")";
  return os.str();
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? ", " : "") << ranks[i];
  return os.str();
}

std::string difference(const Meta& a, int rank_a, const Meta& b, int rank_b) {
  std::ostringstream os;
  auto both = [&](auto what, auto va, auto vb) {
    os << "rank " << rank_a << " has " << what << " " << va << ", rank " << rank_b << " has " << vb;
  };
  if (a.kind != b.kind) {
    both("a", kind_name(a.kind), kind_name(b.kind));
  } else if (a.gpu != b.gpu) {
    both("arrays on the", a.gpu ? "GPU" : "CPU", b.gpu ? "GPU" : "CPU");
  } else if (a.dtype != b.dtype) {
    both("dtype", dtype_name(a.dtype), dtype_name(b.dtype));
  } else if (a.shape != b.shape) {
    both("shape", shape_text(a.shape), shape_text(b.shape));
  } else if (a.kind != Kind::kBroadcast && a.op != b.op) {
    both("op", reduce_op_name(a.op), reduce_op_name(b.op));
  } else if (a.kind == Kind::kBroadcast && a.root != b.root) {
    both("root", a.root, b.root);
  }
  return os.str();
}

size_t payload_bytes(const Meta& m) {
  size_t n = dtype_size(m.dtype);
  for (int64_t d : m.shape) n *= static_cast<size_t>(d);
  return n;
}

void divide_by(void* data, size_t count, DType dtype, int size) {
  if (size == 1) return;
  switch (dtype) {
    case DType::kFloat32:
      return divide<float>(data, count, size);
    case DType::kFloat64:
      return divide<double>(data, count, size);
    case DType::kInt32:
      return divide<int32_t>(data, count, size);
    case DType::kInt64:
      return divide<int64_t>(data, count, size);
    case DType::kInt8:
      return divide<int8_t>(data, count, size);
    case DType::kUInt8:
      return divide<uint8_t>(data, count, size);
    case DType::kInt16:
      return divide<int16_t>(data, count, size);
    case DType::kUInt16:
      return divide<uint16_t>(data, count, size);
    case DType::kUInt32:
      return divide<uint32_t>(data, count, size);
    case DType::kUInt64:
      return divide<uint64_t>(data, count, size);
    default:
      throw NotImplemented(std::string("dist: mean of ") + dtype_name(dtype) + " arrays");
  }
}

}  // namespace weft::dist::detail
