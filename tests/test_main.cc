// The one main() of zplan_tests (Catch2 v2 single header).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
