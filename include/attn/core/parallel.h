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

// An outside thread team for the parallel_for calls made from the calling thread, instead of attn's
// pool: run(threads, body, ctx) must call body(t, ctx) once for each t in [0, threads), on any threads
// (concurrently or not), and return when all have returned; body never throws. The Python module
// installs the host's OpenMP team here around a call from PyTorch, so attn's kernels run on the
// threads torch's own operators just used (still spinning for work) instead of competing with them
// for the cores. While set on a thread, num_threads() there is `threads`. run = nullptr restores the
// pool. TeamScope sets it for a scope and restores the previous one.
using TeamRun = void (*)(int threads, void (*body)(int thread_id, void* ctx), void* ctx);
void set_thread_team(TeamRun run, int threads);

class TeamScope {
 public:
  TeamScope(TeamRun run, int threads);
  ~TeamScope();
  TeamScope(const TeamScope&) = delete;
  TeamScope& operator=(const TeamScope&) = delete;

 private:
  TeamRun run_;
  int threads_;
};

}  // namespace attn
