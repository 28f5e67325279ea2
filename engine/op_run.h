// The steps of pushing and running one operation that both engines take alike: building its
// slots, its profile stamps, input errors, calling its body, and the error it leaves behind.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string_view>

#include "engine/engine.h"
#include "engine/var.h"

namespace weft::detail {

class FailureLog;

/// Builds the slots of the pushed operation `op` (build_slots) and names it `name` when given; on
/// a bad variable list it destroys `op` (back to its pool) and rethrows the ValueError.
void adopt_pushed(OprBlock* op, VarList reads, VarList writes, std::string_view name);

/// Gives `op` its profile id and queue time when the profiler is on (at push).
void stamp_queued(OprBlock* op);

/// Prepares `op`, whose variables are held, to run on this thread: a user operation whose input
/// carries an error inherits it (Note [Var error ordering]: held variables' errors are stable),
/// and a profiled one records its start time and lane. Call from the thread that runs it.
void begin_run(OprBlock* op);

/// Calls the synchronous body of `op`; returns what it threw, or null.
std::exception_ptr call_sync_body(OprBlock* op, const RunContext& context);

/// Calls the asynchronous body of `op` (whose completion token is `token`, also carried by
/// `on_complete`) on this thread. Note [Completion tokens]: returns the body's exception when it
/// threw before calling back, and the caller then completes the operation with it; records one
/// thrown after calling back in `failures` (its variables were released already) and returns
/// null then, as when the body did not throw. Never completes the operation itself.
std::exception_ptr call_async_body(OprBlock* op, const RunContext& context,
                                   const CallbackOnComplete& on_complete, uint64_t token,
                                   FailureLog& failures);

/// The error slot `op` leaves on the variables it writes, counted in `failures`: its own
/// `error` (recorded as a failure), else the error it inherited (a skip), else null.
std::shared_ptr<ErrorSlot> outcome_slot(OprBlock* op, std::exception_ptr error,
                                        FailureLog& failures);

}  // namespace weft::detail
