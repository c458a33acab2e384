// The OpenMP thread team for attn::set_thread_team (team.cc).
#pragma once

#include <attn/core/parallel.h>

namespace attn::python {

attn::TeamRun openmp_team();
int openmp_max_threads();  // omp_get_max_threads() of the process's OpenMP runtime

}  // namespace attn::python
