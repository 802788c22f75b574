list(APPEND ZPLAN_TEST_SOURCES
  hardware/cost_model_test.cc
  hardware/profile_test.cc
)
