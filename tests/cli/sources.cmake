list(APPEND ZPLAN_TEST_SOURCES cli/bad_input_test.cc cli/ds_config_fixtures_test.cc cli/examples_test.cc
     cli/moe_leaf_text_test.cc cli/readme_test.cc cli/remote_code_test.cc cli/training_flags_test.cc
     cli/trial_inputs_test.cc cli/zeropp_text_test.cc)
