list(APPEND ZPLAN_TEST_SOURCES planner/search_space_test.cc
     planner/plan_test.cc planner/cli_plan_test.cc planner/pcie_profiles_plan_test.cc
     planner/written_ds_config_test.cc planner/comm_variants_test.cc
     planner/finetune_plan_test.cc)
