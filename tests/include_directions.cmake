# Checks that no library folder includes a header of a folder above it: the include side of the
# link order that the CMake targets enforce (docs/design.md). Run by ctest as
# `cmake -DSOURCE_DIR=<repo> -P tests/include_directions.cmake`; fails naming each offending line.
cmake_minimum_required(VERSION 3.25)
set(_folders base models hardware sim planner kernels calibrate executor cli)
# What each folder may include besides itself.
set(_may_base "")
set(_may_models base)
set(_may_hardware base)  # not models/: profiles and cost functions know no network
set(_may_sim hardware models base)
set(_may_planner sim hardware models base)
set(_may_kernels base)
set(_may_calibrate kernels hardware models base)
set(_may_executor kernels sim hardware models base)
set(_may_cli ${_folders})

set(_bad "")
foreach(folder IN LISTS _folders)
  file(GLOB_RECURSE _files RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${folder}/*.h
       ${SOURCE_DIR}/${folder}/*.cc ${SOURCE_DIR}/${folder}/*.cu)
  foreach(f IN LISTS _files)
    file(STRINGS ${SOURCE_DIR}/${f} _includes REGEX "^#include \"[a-z_]+/")
    foreach(line IN LISTS _includes)
      string(REGEX REPLACE "^#include \"([a-z_]+)/.*" "\\1" top "${line}")
      if(top IN_LIST _folders AND NOT top STREQUAL folder AND NOT top IN_LIST _may_${folder})
        list(APPEND _bad "${f}: ${line} (${folder}/ must not depend on ${top}/)")
      endif()
    endforeach()
  endforeach()
endforeach()
# The rooms inside sim/ (sim/README.md): the ds_config reader and writer include nothing else of
# sim/, and the engine's core no sim/ header outside the core.
set(_engine_core engine.h engine.cc engine_core_check.cc engine_periodic.cc event_queue.h
    event_queue.cc fingerprint.h memory_breakdown.h memory_breakdown.cc periodic.h periodic.cc
    step_graph.h step_graph.cc time.h)
file(GLOB _ds_config_files RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/sim/ds_config/*.h
     ${SOURCE_DIR}/sim/ds_config/*.cc)
foreach(f IN LISTS _ds_config_files)
  file(STRINGS ${SOURCE_DIR}/${f} _includes REGEX "^#include \"sim/")
  foreach(line IN LISTS _includes)
    if(NOT line MATCHES "^#include \"sim/ds_config/")
      list(APPEND _bad "${f}: ${line} (sim/ds_config/ must not depend on the rest of sim/)")
    endif()
  endforeach()
endforeach()
foreach(name IN LISTS _engine_core)
  file(STRINGS ${SOURCE_DIR}/sim/${name} _includes REGEX "^#include \"[a-z_]+/")
  foreach(line IN LISTS _includes)
    string(REGEX REPLACE "^#include \"sim/([a-z_]+\\.[a-z]+)\".*" "\\1" header "${line}")
    if(line MATCHES "^#include \"base/input_error.h\"" AND name STREQUAL "step_graph.cc")
      continue()  # InputError, from the base (StepGraph::finalize)
    endif()
    if(NOT line MATCHES "^#include \"sim/[a-z_]+\\.[a-z]+\"" OR NOT header IN_LIST _engine_core)
      list(APPEND _bad "sim/${name}: ${line} (the engine's core must not depend on it)")
    endif()
  endforeach()
endforeach()
if(_bad)
  list(JOIN _bad "\n" _text)
  message(FATAL_ERROR "includes against the link order:\n${_text}")
endif()
