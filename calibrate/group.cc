#include "calibrate/group.h"

#include <cstdlib>
#include <string>

#include <unistd.h>

namespace zplan::calibrate {

namespace {

class SingleProcessGroup : public Group {
 public:
  SingleProcessGroup() : hosts_{host_name()} {}

  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  const std::vector<std::string>& hosts() const override { return hosts_; }
  std::string library() const override { return ""; }
  void barrier() override {}
  void sum(std::vector<double>*) override {}
  void max(std::vector<double>*) override {}
  void broadcast(void*, size_t, int) override {}

 private:
  std::vector<std::string> hosts_;
};

}  // namespace

std::unique_ptr<Group> make_single_process_group() {
  return std::make_unique<SingleProcessGroup>();
}

std::string mpi_launcher_variable() {
  // Set for every rank by: Open MPI's mpirun, MPICH/Hydra (PMI), MVAPICH, PMIx launchers. (Not
  // SLURM_NTASKS: a batch script has it without any launcher.)
  for (const char* name :
       {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "PMIX_RANK"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && v[0] != '\0') return std::string(name) + "=" + v;
  }
  return "";
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace zplan::calibrate
