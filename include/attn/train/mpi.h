// The MPI communicator (include/attn/train/comm.h), in its own library:
// attn::mpi (CMake option ATTN_MPI, on by default when MPI is found). Only that
// library includes <mpi.h> and links MPI; the rest of attn builds and runs
// without it. ATTN_HAVE_MPI is defined (1) for targets that link attn::mpi.
//
//   mpirun -np 2 attn train translate ...     (docs/training.md)
#pragma once

#include <attn/train/comm.h>

#include <memory>

namespace attn::train {

// Initialises MPI (once per process; MPI_THREAD_FUNNELED: only the thread that
// called it talks to MPI) and returns a communicator over MPI_COMM_WORLD. MPI
// is finalised when the returned object is destroyed. Errors of MPI calls are
// attn::Error with MPI's message.
std::unique_ptr<Communicator> mpi_communicator(int* argc = nullptr, char*** argv = nullptr);

}  // namespace attn::train
