// The MPI communicator (include/attn/train/mpi.h). Compiled into attn_mpi only
// (CMakeLists.txt: files ending in _mpi.cc), never into attn_train.
#include <attn/core/error.h>
#include <attn/train/mpi.h>
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace attn::train {
namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(std::string("MPI: ") + what + " failed: " + std::string(text, static_cast<std::size_t>(len)));
}

// MPI counts are int: longer buffers go in pieces.
constexpr std::size_t kMaxCount = static_cast<std::size_t>(INT_MAX) / 2;

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(int* argc, char*** argv) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owns_ = true;
    }
    // Errors come back as return codes (turned into attn::Error), not as MPI's abort.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  }
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_ && !finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  void allreduce_sum(float* data, std::size_t n) override {
    reduce(data, n, MPI_FLOAT, MPI_SUM, sizeof(float));
  }
  void allreduce_sum(double* data, std::size_t n) override {
    reduce(data, n, MPI_DOUBLE, MPI_SUM, sizeof(double));
  }
  void allreduce_max(int64_t* data, std::size_t n) override {
    reduce(data, n, MPI_INT64_T, MPI_MAX, sizeof(int64_t));
  }
  void broadcast(void* data, std::size_t bytes, int root) override {
    char* p = static_cast<char*>(data);
    for (std::size_t done = 0; done < bytes;) {
      const std::size_t n = std::min(kMaxCount, bytes - done);
      check_mpi(MPI_Bcast(p + done, static_cast<int>(n), MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
      done += n;
    }
  }
  void barrier() override { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  [[noreturn]] void abort(int code) override {
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this is for the compiler
  }

 private:
  void reduce(void* data, std::size_t n, MPI_Datatype type, MPI_Op op, std::size_t elem) {
    char* p = static_cast<char*>(data);
    for (std::size_t done = 0; done < n;) {
      const std::size_t k = std::min(kMaxCount, n - done);
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, p + done * elem, static_cast<int>(k), type, op, MPI_COMM_WORLD),
                "MPI_Allreduce");
      done += k;
    }
  }
  int rank_ = 0, size_ = 1;
  bool owns_ = false;
};

}  // namespace

std::unique_ptr<Communicator> mpi_communicator(int* argc, char*** argv) {
  return std::make_unique<MpiCommunicator>(argc, argv);
}

}  // namespace attn::train
