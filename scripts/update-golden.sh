#!/bin/sh
# Regenerates tests/golden/examples.json from the current build (default preset), after a
# deliberate change to the model. Review `git diff tests/golden` before committing.
set -eu
cd "$(dirname "$0")/.."
cmake --build --preset default --target zplan zplan_tests
ZPLAN_UPDATE_GOLDEN=1 build/default/tests/zplan_tests "[golden]"
git --no-pager diff --stat tests/golden
