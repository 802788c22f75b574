list(APPEND ZPLAN_TEST_SOURCES sim/zero_config_test.cc sim/estimators_test.cc sim/memory_model_test.cc)
