# Optional measurement backends of calibrate/ (and the reference executor).
#
# Each ZPLAN_WITH_<X> is AUTO (use it if found), ON (fail if missing) or OFF (do not look).
# Results: ZPLAN_HAVE_<X> (0/1) for kernels/config.h, imported targets, and a summary line.
set(_zplan_features "")

function(_zplan_feature name have reason)
  if(have)
    list(APPEND _zplan_features "  ${name}: ON")
  else()
    list(APPEND _zplan_features "  ${name}: OFF (${reason})")
  endif()
  set(_zplan_features "${_zplan_features}" PARENT_SCOPE)
endfunction()

macro(_zplan_require opt found what hint)
  if("${${opt}}" STREQUAL "ON" AND NOT ${found})
    message(FATAL_ERROR "${opt}=ON but ${what} was not found: ${hint}")
  endif()
endmacro()

# --- CUDA toolkit (cudart + cuBLAS; no .cu files, so no CUDA compiler is needed) ---
set(ZPLAN_HAVE_CUDA 0)
set(_cuda_reason "not requested")
if(NOT ZPLAN_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND TARGET CUDA::cudart AND TARGET CUDA::cublas)
    set(ZPLAN_HAVE_CUDA 1)
  else()
    set(_cuda_reason "CUDA toolkit with cuBLAS not found, put nvcc on PATH or set CUDAToolkit_ROOT")
  endif()
  _zplan_require(ZPLAN_WITH_CUDA ZPLAN_HAVE_CUDA "the CUDA toolkit" "${_cuda_reason}")
endif()
_zplan_feature("cuda backend (cudart, cuBLAS)" ${ZPLAN_HAVE_CUDA} "${_cuda_reason}")

# --- The CUDA executor device: cudart + cuBLAS + zplan's own kernels, so it needs nvcc too ---
set(ZPLAN_HAVE_CUDA_EXECUTOR 0)
set(_cuda_exec_reason "needs the cuda backend")
if(ZPLAN_HAVE_CUDA)
  include(CheckLanguage)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Ampere and Hopper (A100, H100, H200); override with -DCMAKE_CUDA_ARCHITECTURES=...
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    set(ZPLAN_HAVE_CUDA_EXECUTOR 1)
  else()
    set(_cuda_exec_reason "no CUDA compiler (nvcc) found for its kernels")
  endif()
endif()
_zplan_feature("cuda executor device (validate --device cuda)" ${ZPLAN_HAVE_CUDA_EXECUTOR}
               "${_cuda_exec_reason}")

# --- NCCL: ships no CMake package; look beside the CUDA toolkit and in NCCL_HOME ---
set(ZPLAN_HAVE_NCCL 0)
set(_nccl_reason "not requested")
if(NOT ZPLAN_WITH_NCCL STREQUAL "OFF")
  if(ZPLAN_HAVE_CUDA)
    find_path(ZPLAN_NCCL_INCLUDE_DIR nccl.h
              HINTS $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS})
    find_library(ZPLAN_NCCL_LIBRARY nccl
                 HINTS $ENV{NCCL_HOME}/lib ${CUDAToolkit_LIBRARY_DIR})
    if(ZPLAN_NCCL_INCLUDE_DIR AND ZPLAN_NCCL_LIBRARY)
      add_library(zplan_nccl UNKNOWN IMPORTED)
      set_target_properties(zplan_nccl PROPERTIES IMPORTED_LOCATION ${ZPLAN_NCCL_LIBRARY}
                            INTERFACE_INCLUDE_DIRECTORIES ${ZPLAN_NCCL_INCLUDE_DIR})
      set(ZPLAN_HAVE_NCCL 1)
    else()
      set(_nccl_reason "nccl.h / libnccl not found, set NCCL_HOME")
    endif()
  else()
    set(_nccl_reason "needs the cuda backend")
  endif()
  _zplan_require(ZPLAN_WITH_NCCL ZPLAN_HAVE_NCCL "NCCL" "${_nccl_reason}")
endif()
_zplan_feature("nccl backend" ${ZPLAN_HAVE_NCCL} "${_nccl_reason}")

# --- MPI (Open MPI from Debian: libopenmpi-dev) ---
set(ZPLAN_HAVE_MPI 0)
set(_mpi_reason "not requested")
if(NOT ZPLAN_WITH_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(ZPLAN_HAVE_MPI 1)
  else()
    set(_mpi_reason "MPI not found, apt-get install libopenmpi-dev openmpi-bin")
  endif()
  _zplan_require(ZPLAN_WITH_MPI ZPLAN_HAVE_MPI "MPI" "${_mpi_reason}")
endif()
_zplan_feature("mpi backend + multi-rank executor" ${ZPLAN_HAVE_MPI} "${_mpi_reason}")

# --- BLAS for the CPU executor's GEMMs (OpenBLAS from Debian; reference BLAS works too) ---
set(ZPLAN_HAVE_BLAS 0)
find_path(ZPLAN_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas-pthread openblas)
find_library(ZPLAN_BLAS_LIBRARY NAMES openblas blas)
if(ZPLAN_CBLAS_INCLUDE_DIR AND ZPLAN_BLAS_LIBRARY)
  add_library(zplan_blas UNKNOWN IMPORTED)
  set_target_properties(zplan_blas PROPERTIES IMPORTED_LOCATION ${ZPLAN_BLAS_LIBRARY}
                        INTERFACE_INCLUDE_DIRECTORIES ${ZPLAN_CBLAS_INCLUDE_DIR})
  set(ZPLAN_HAVE_BLAS 1)
endif()
_zplan_feature("BLAS GEMMs in the executor" ${ZPLAN_HAVE_BLAS}
               "cblas.h / libopenblas not found, apt-get install libopenblas-dev (loops used instead)")

# --- io_uring for the NVMe probe and swap (liburing from Debian) ---
set(ZPLAN_HAVE_URING 0)
find_path(ZPLAN_URING_INCLUDE_DIR liburing.h)
find_library(ZPLAN_URING_LIBRARY uring)
if(ZPLAN_URING_INCLUDE_DIR AND ZPLAN_URING_LIBRARY)
  add_library(zplan_uring UNKNOWN IMPORTED)
  set_target_properties(zplan_uring PROPERTIES IMPORTED_LOCATION ${ZPLAN_URING_LIBRARY}
                        INTERFACE_INCLUDE_DIRECTORIES ${ZPLAN_URING_INCLUDE_DIR})
  set(ZPLAN_HAVE_URING 1)
endif()
_zplan_feature("io_uring NVMe I/O" ${ZPLAN_HAVE_URING}
               "liburing not found, apt-get install liburing-dev (synchronous O_DIRECT used instead)")

function(zplan_print_feature_summary)
  message(STATUS "zplan ${PROJECT_VERSION} features:")
  foreach(line IN LISTS _zplan_features)
    message(STATUS "${line}")
  endforeach()
endfunction()
