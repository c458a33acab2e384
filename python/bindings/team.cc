// The host's OpenMP team as attn's thread team (attn::set_thread_team, attn/core/parallel.h).
//
// torch on the CPU runs its operators on OpenMP (libgomp); after each parallel region its worker
// threads spin for several milliseconds waiting for the next one (GOMP's default spin). When attn's
// own pool then runs a kernel, its threads compete with those spinning workers for the same cores.
// Running attn's parallel_for as an OpenMP parallel region instead puts the work on the threads
// torch just used: the module links libgomp.so.1, and a process that has loaded torch has exactly
// one copy of it (the same soname), so the team is torch's.
#include "team.h"

#include <omp.h>

namespace attn::python {

namespace {

void openmp_run(int threads, void (*body)(int, void*), void* ctx) {
#pragma omp parallel num_threads(threads)
  body(omp_get_thread_num(), ctx);
}

}  // namespace

attn::TeamRun openmp_team() { return &openmp_run; }

int openmp_max_threads() { return omp_get_max_threads(); }

}  // namespace attn::python
