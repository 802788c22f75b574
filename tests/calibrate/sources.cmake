list(APPEND ZPLAN_TEST_SOURCES
  calibrate/calibrate_test.cc
  calibrate/collective_sweep_test.cc
  calibrate/fit_test.cc
  calibrate/gpu_backend_test.cc
  calibrate/host_backend_test.cc
  calibrate/interrupt_test.cc
  calibrate/mpi_run_test.cc
  calibrate/registry_test.cc
)
