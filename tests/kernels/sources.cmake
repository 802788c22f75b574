list(APPEND ZPLAN_TEST_SOURCES
  kernels/block_transfer_test.cc
  kernels/comm_test.cc
  kernels/cpu_adam_test.cc
  kernels/cpu_gemm_test.cc
)
