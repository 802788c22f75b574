list(APPEND ZPLAN_TEST_SOURCES
  base/text_test.cc
)
