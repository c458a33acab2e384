// Internal queries on attn's thread pool (include/attn/core/parallel.h).
#pragma once

namespace attn::core {

// True on a thread that is running a chunk of a parallel_for job (the caller
// thread included while it takes part). Work started here runs serially.
bool in_parallel_region();

}  // namespace attn::core
