# openblas.cmake - pick the OpenBLAS build to link: its OpenMP build where one is
# installed, so that BLAS and the engine's OpenMP loops share one thread pool.
#
# The pthreads build keeps a second pool whose threads spin against the
# engine's (docs/ARCHITECTURE.md, "One thread pool").  Debian and Ubuntu install
# each build in its own directory (libopenblas-openmp-dev, -pthread-dev,
# -serial-dev) and point pkg-config's `openblas` at the alternative of highest
# priority, the pthreads build wherever both are installed; so the OpenMP
# build's own openblas.pc is looked for first and handed to pkg-config by path
# (a new path also makes an existing build directory check again).
# -DGSB_OPENBLAS_PC=<path to an openblas.pc, or a module name> overrides it.
# Defines the imported target PkgConfig::OPENBLAS, and GSB_OPENBLAS_OPENMP (ON
# where it is the OpenMP build; tests/c/test_cpu_threads.c checks it is the one
# that runs).

set(GSB_OPENBLAS_PC "" CACHE STRING
    "openblas.pc to build with (a path or a pkg-config module; default: OpenBLAS's OpenMP build where installed, else pkg-config's openblas)")
set(_gsb_openblas_module "${GSB_OPENBLAS_PC}")
# with a pkg-config sysroot (tools/gpu-check's carried packages), PKG_CONFIG_PATH chooses
if(NOT _gsb_openblas_module AND NOT DEFINED ENV{PKG_CONFIG_SYSROOT_DIR})
  find_file(GSB_OPENBLAS_OPENMP_PC openblas.pc
            PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp/pkgconfig
            NO_DEFAULT_PATH)
  mark_as_advanced(GSB_OPENBLAS_OPENMP_PC)
  if(GSB_OPENBLAS_OPENMP_PC)
    set(_gsb_openblas_module "${GSB_OPENBLAS_OPENMP_PC}")
  endif()
endif()
if(NOT _gsb_openblas_module)
  set(_gsb_openblas_module openblas)
endif()
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET "${_gsb_openblas_module}")
pkg_get_variable(_gsb_openblas_config "${_gsb_openblas_module}" openblas_config)
if(_gsb_openblas_config MATCHES "USE_OPENMP=1")
  set(GSB_OPENBLAS_OPENMP ON)
  message(STATUS "OpenBLAS: its OpenMP build (${OPENBLAS_LIBRARY_DIRS}): one thread pool")
else()
  set(GSB_OPENBLAS_OPENMP OFF)
  message(WARNING "OpenBLAS at ${OPENBLAS_LIBRARY_DIRS} is not its OpenMP build: BLAS keeps a "
          "thread pool of its own beside the engine's OpenMP threads, and the engine makes "
          "BLAS single-threaded inside its parallel loops. tools/install-deps.sh installs "
          "the OpenMP build (libopenblas-openmp-dev).")
endif()
