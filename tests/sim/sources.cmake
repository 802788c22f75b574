list(APPEND ZPLAN_TEST_SOURCES
  sim/engine_test.cc
  sim/estimators_test.cc
  sim/finetune_test.cc
  sim/knobs_test.cc
  sim/memory_model_test.cc
  sim/periodic_test.cc
  sim/sequence_parallel_test.cc
  sim/simulate_test.cc
  sim/step_inputs_test.cc
  sim/swap_buffers_test.cc
  sim/workload_test.cc
  sim/zero_config_batch_test.cc
  sim/zero_config_test.cc
  sim/zero_config_trainer_test.cc
  sim/zero_config_write_test.cc
  sim/zeropp_mics_test.cc
)
