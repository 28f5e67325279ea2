// c_api_fuzz's shared pieces: the byte reader that decodes argument values, the table of live
// handles an input owns, the checks of Note [C ABI fuzzing contract], and the calls of each
// subject (declared here, defined in c_api_fuzz_*.cc). Call from one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_runtime.h"
#include "weft/c_api.h"

namespace weft::fuzz::capi {

/// Bytes one array (or one call's outputs, or one bound executor) may take; larger calls are
/// skipped. Small, so that every kernel on such arrays is quick.
inline constexpr size_t kBudget = size_t{1} << 20;
/// Calls per input; live handles of each kind per input.
inline constexpr int kMaxSteps = 64;
inline constexpr size_t kMaxArrays = 16;
inline constexpr size_t kMaxVars = 8;
inline constexpr size_t kMaxGraphs = 4;
inline constexpr size_t kMaxExecutors = 2;
inline constexpr size_t kMaxExports = 8;
/// Entries behind every shape pointer passed: any ndim up to this is backed by memory.
inline constexpr int kShapeCapacity = 40;

/// Prints which call broke the contract, then traps (the finding's stack is the caller's).
[[noreturn]] void fail(const char* call, const char* what);
/// Checks a return code: 0, or -1 with a non-empty weft_last_error().
void expect(int rc, const char* call);

/// Decodes the input: each read takes the next byte (0 once the input is spent, so that a
/// short input ends in plain, valid values). Pools list their ordinary values first.
class Program {
 public:
  Program(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  template <typename T, size_t N>
  const T& pick(const T (&pool)[N]) {
    return pool[u8() % N];
  }
  /// A count or code from 0 to n - 1, or -1 (the last choice, so that 0 decodes as 0).
  int count(int n) {
    const int b = u8() % (n + 1);
    return b == n ? -1 : b;
  }
  /// Bytes of the input taken as text (up to `max`, bounded by what is left).
  std::string text(size_t max);
  int ndim();
  int64_t dim();
  int dtype();
  weft_device_t device();

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

/// Attribute values: valid ones of each kind, then malformed and out-of-range ones.
const char* value_text(uint8_t index);

/// Bytes an array of this shape and dtype code takes; valid = false when weft must refuse it
/// (bad ndim, dims, dtype, or more than 2^56 elements).
struct Bytes {
  bool valid = false;
  size_t bytes = 0;
};
Bytes array_bytes(const int64_t* shape, int ndim, int dtype);

/// Whether weft_invoke with these arguments would allocate more than kBudget (asks the op's own
/// inference). False when inference fails: the call is made and must fail cleanly.
bool invoke_too_big(const std::string& op, const weft_array_t* inputs, int num_inputs,
                    const char* const* keys, const char* const* values, int num_attrs);

/// A DLPack tensor the harness made for import, with the memory its fields point at.
struct OwnedTensor;

/// Everything one input made; finish() waits, frees it all and checks that every deleter and
/// user-data free ran exactly once.
class State {
 public:
  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  /// A live array picked by the next byte, or NULL (also when there is none).
  weft_array_t array_or_null(Program& p);
  /// Takes ownership of a new handle (freeing it at once when the table is full).
  void add_array(weft_array_t a);
  void free_array(weft_array_t a);
  size_t nbytes(weft_array_t a) const;
  void finish();

  std::vector<weft_array_t> arrays;
  /// Handles this input freed: generation-checked, so every use of one must fail (the harness
  /// never dereferences a handle; the table behind it is weft's).
  std::vector<weft_array_t> freed_arrays;
  std::vector<weft_graph_t> freed_graphs;
  std::vector<weft_var_t> vars;  // from weft_var_new, not yet deleted
  std::vector<DLManagedTensor*> exports;
  std::vector<DLManagedTensorVersioned*> exports_versioned;
  std::vector<weft_graph_t> graphs;
  std::vector<std::string> graph_texts;  // the JSON each graph was loaded from
  std::vector<weft_executor_t> executors;
  std::vector<std::string> ops;    // operators this input registered
  std::vector<OwnedTensor*> kept;  // imported without a deleter: freed by finish()
  int registrations = 0;
};

void do_export(Program& p, State& s);
void do_import(Program& p, State& s);
void do_register(Program& p, State& s);
void do_push(Program& p, State& s);
void do_vars(Program& p, State& s);
void do_graph(Program& p, State& s);
void do_executor(Program& p, State& s);
/// A freed array or graph handle used again (query, free, bind): the call must fail.
void do_stale(Program& p, State& s);
/// Frees the tensors imported without a deleter (once no array uses them).
void release_kept(State& s);

/// Live counts of what the harness handed over with a deleter: DLPack tensors it made for
/// import, user data of pushes. Both are zero after State::finish().
extern int g_live_tensors;
extern int g_live_user_data;

}  // namespace weft::fuzz::capi
