# Checks that no library folder includes a header of a folder above it: the include side of the
# link order that the CMake targets enforce (docs/design.md). Run by ctest as
# `cmake -DSOURCE_DIR=<repo> -P tests/include_directions.cmake`; fails naming each offending line.
cmake_minimum_required(VERSION 3.25)
set(_folders base models hardware sim planner kernels calibrate executor cli)
# What each folder may include besides itself.
set(_may_base "")
set(_may_models base)
set(_may_hardware models base)
set(_may_sim hardware models base)
set(_may_planner sim hardware models base)
set(_may_kernels models base)
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
if(_bad)
  list(JOIN _bad "\n" _text)
  message(FATAL_ERROR "includes against the link order:\n${_text}")
endif()
