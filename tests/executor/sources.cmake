list(APPEND ZPLAN_TEST_SOURCES
  executor/executor_cuda_test.cc
  executor/executor_test.cc
  executor/validate_test.cc
)
