// A fixed pool of worker threads and parallel_for over it.
//
// The pool size defaults to the number of cores (std::thread::hardware_concurrency)
// or ATTN_NUM_THREADS when set (runtime_config(), attn/core/config.h); set_num_threads changes it
// at run time.
// parallel_for hands out chunks dynamically (an atomic counter), so uneven
// work such as causal attention rows balances itself. The calling thread takes
// part as thread 0. Nested calls run serially on the calling thread.
#pragma once

#include <cstdint>
#include <functional>

namespace attn {

int num_threads();
void set_num_threads(int n);  // n >= 1; throws attn::Error otherwise

// Calls fn(begin, end, thread_id) over [0, n) in chunks of `grain` items
// (the last chunk may be shorter). thread_id is in [0, num_threads()) and is
// stable for the duration of one call, so callers may index per-thread scratch.
// An exception thrown by fn is rethrown on the calling thread.
void parallel_for(int64_t n, int64_t grain,
                  const std::function<void(int64_t begin, int64_t end, int thread_id)>& fn);

// True on a thread that is running a parallel_for chunk: a parallel_for called there runs serially on
// it (code that needs its chunks to run concurrently, e.g. with barriers between them, checks this).
bool in_parallel_for();

}  // namespace attn
