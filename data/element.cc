// The per-element random generator (Philox-4x32-10) and seed mixing.
#include "data/element.h"

#include "ndarray/runtime.h"

namespace weft::data {

namespace {
// The DataPtr deleter of wrapped memory: drops the owner (a heap-held shared_ptr).
void release_owner(void* context, void* /*ptr*/, size_t /*size*/) noexcept {
  delete static_cast<std::shared_ptr<const void>*>(context);
}
}  // namespace

NDArray wrap_host_memory(std::shared_ptr<const void> owner, void* data, const Shape& shape,
                         DType dtype, bool read_only) {
  WEFT_CHECK(shape.known()) << "wrap_host_memory: shape " << shape << " is not fully known";
  const size_t bytes = static_cast<size_t>(shape.size()) * dtype_size(dtype);
  Runtime& rt = Runtime::get();
  auto s = std::make_shared<weft::detail::Storage>();
  s->data = DataPtr(data, bytes, Device::cpu(), new std::shared_ptr<const void>(std::move(owner)),
                    &release_owner);
  s->engine = &rt.engine();
  s->var = s->engine->new_var();
  s->device = Device::cpu();
  s->bytes = bytes;
  s->id = rt.next_storage_id();
  s->generation = rt.generation();
  s->read_only = read_only;
  return NDArray(std::move(s), shape, dtype);
}

uint64_t mix_seed(uint64_t a, uint64_t b) {
  // splitmix64's finaliser over a combination of both words.
  uint64_t z = a + 0x9E3779B97F4A7C15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

Rng::Rng(uint64_t seed, uint64_t stream) {
  key_[0] = static_cast<uint32_t>(seed);
  key_[1] = static_cast<uint32_t>(seed >> 32);
  counter_[2] = static_cast<uint32_t>(stream);
  counter_[3] = static_cast<uint32_t>(stream >> 32);
}

// Philox-4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
void Rng::refill() {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c[4] = {counter_[0], counter_[1], counter_[2], counter_[3]};
  uint32_t k0 = key_[0], k1 = key_[1];
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c[0] = hi1 ^ c[1] ^ k0;
    c[1] = lo1;
    c[2] = hi0 ^ c[3] ^ k1;
    c[3] = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  for (int i = 0; i < 4; ++i) block_[i] = c[i];
  used_ = 0;
  // The 64-bit block counter lives in words 0-1; words 2-3 hold the stream id.
  if (++counter_[0] == 0) ++counter_[1];
}

uint32_t Rng::next_u32() {
  if (used_ == 4) refill();
  return block_[used_++];
}

double Rng::uniform() {
  const uint64_t hi = next_u32() >> 5;  // 27 + 26 = 53 bits, high part drawn first
  const uint64_t lo = next_u32() >> 6;
  return static_cast<double>((hi << 26) | lo) * (1.0 / 9007199254740992.0);
}

int64_t Rng::uniform_int(int64_t low, int64_t high) {
  WEFT_CHECK(low <= high) << "Rng::uniform_int: empty range [" << low << ", " << high << "]";
  const uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low) + 1;
  if (span == 0) {  // the whole 64-bit range
    return static_cast<int64_t>(next_u64());
  }
  // Rejection keeps the draw unbiased.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  uint64_t r;
  do {
    r = next_u64();
  } while (r >= limit);
  return low + static_cast<int64_t>(r % span);
}

}  // namespace weft::data
