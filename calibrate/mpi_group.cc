// Group over MPI_COMM_WORLD (built with ZPLAN_HAVE_MPI).
#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include <mpi.h>

#include "calibrate/group.h"
#include "kernels/check.h"

namespace zplan::calibrate {

namespace {

constexpr int kHostNameBytes = 256;

class MpiGroup : public Group {
 public:
  MpiGroup() {
    int initialized = 0;
    ZPLAN_MPI_CHECK(MPI_Initialized(&initialized));
    if (!initialized) {
      int provided = 0;
      // The thread level zplan's executor asks for, so that MPI behaves as it will there.
      ZPLAN_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
      owns_mpi_ = true;
    }
    // Errors come back as codes that ZPLAN_MPI_CHECK turns into exceptions.
    ZPLAN_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    ZPLAN_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    ZPLAN_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size_));
    ZPLAN_MPI_CHECK(
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local_));
    ZPLAN_MPI_CHECK(MPI_Comm_rank(local_, &local_rank_));
    ZPLAN_MPI_CHECK(MPI_Comm_size(local_, &local_size_));

    std::vector<char> mine(kHostNameBytes, '\0');
    std::string me = host_name().substr(0, kHostNameBytes - 1);
    std::copy(me.begin(), me.end(), mine.begin());
    std::vector<char> all(size_t(kHostNameBytes) * size_, '\0');
    ZPLAN_MPI_CHECK(MPI_Allgather(mine.data(), kHostNameBytes, MPI_CHAR, all.data(), kHostNameBytes,
                                  MPI_CHAR, MPI_COMM_WORLD));
    for (int r = 0; r < size_; ++r) {
      std::string h(all.data() + size_t(r) * kHostNameBytes);
      if (std::find(hosts_.begin(), hosts_.end(), h) == hosts_.end()) hosts_.push_back(h);
    }
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    ZPLAN_MPI_CHECK(MPI_Get_library_version(version, &len));
    library_ = std::string(version, len);
    while (!library_.empty() && (library_.back() == '\n' || library_.back() == '\0')) {
      library_.pop_back();
    }
  }

  ~MpiGroup() override {
    if (std::uncaught_exceptions() > 0) return;  // see make_mpi_group in group.h
    MPI_Comm_free(&local_);
    if (owns_mpi_) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  const std::vector<std::string>& hosts() const override { return hosts_; }
  std::string library() const override { return library_; }

  void barrier() override { ZPLAN_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD)); }
  void sum(std::vector<double>* v) override {
    ZPLAN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v->data(), static_cast<int>(v->size()), MPI_DOUBLE,
                                  MPI_SUM, MPI_COMM_WORLD));
  }
  void max(std::vector<double>* v) override {
    ZPLAN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v->data(), static_cast<int>(v->size()), MPI_DOUBLE,
                                  MPI_MAX, MPI_COMM_WORLD));
  }
  void broadcast(void* data, size_t bytes, int root) override {
    ZPLAN_MPI_CHECK(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, MPI_COMM_WORLD));
  }

 private:
  bool owns_mpi_ = false;
  int rank_ = 0;
  int size_ = 1;
  MPI_Comm local_ = MPI_COMM_NULL;
  int local_rank_ = 0;
  int local_size_ = 1;
  std::vector<std::string> hosts_;
  std::string library_;
};

}  // namespace

std::unique_ptr<Group> make_mpi_group() { return std::make_unique<MpiGroup>(); }

}  // namespace zplan::calibrate
