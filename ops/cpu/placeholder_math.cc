// Placeholder: the CPU kernel families below move here from ops/*.cc one by one (the regroup of
// ops/ into defs/ and cpu/). Until a family moves, its kernels are still set by its definitions.
#include "ops/cpu/register.h"

namespace weft::cpu {

void register_pick_kernels(OpRegistry&) {}

}  // namespace weft::cpu
