list(APPEND ZPLAN_TEST_SOURCES
  base/json_reader_test.cc
  base/text_test.cc
)
