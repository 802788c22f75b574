list(APPEND ZPLAN_TEST_SOURCES
  models/activations_test.cc
  models/catalog_test.cc
  models/families_test.cc
  models/finetune_test.cc
  models/hf_config_test.cc
  models/model_test.cc
  models/presets_test.cc
  models/tensor_parallel_test.cc
)
