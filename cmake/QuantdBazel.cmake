# The CMake side of cmake/bazel_sources.py: functions that turn the targets
# it reads from the BUILD files into CMake targets with the same sources,
# copts, defines and dependency edges as Bazel.
include_guard(GLOBAL)

set(QUANTD_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." CACHE INTERNAL "")
get_filename_component(QUANTD_SOURCE_DIR "${QUANTD_SOURCE_DIR}" ABSOLUTE)

function(_quantd_abs out)
  set(result "")
  foreach(f IN LISTS ARGN)
    list(APPEND result "${QUANTD_SOURCE_DIR}/${f}")
  endforeach()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# A //third_party wrapper: the system library's link flags (headers come
# from the default include path, as in Bazel).
function(quantd_third_party name)
  cmake_parse_arguments(A "" "" "LINKOPTS;DEPS" ${ARGN})
  add_library(${name} INTERFACE)
  target_link_libraries(${name} INTERFACE ${A_DEPS} ${A_LINKOPTS})
endfunction()

# //third_party:libtorch: whatever find_package(Torch) found (Debian's
# 1.13, or LIBTORCH_HOME). The GPU backend library is linked outside
# --as-needed: nothing references its symbols, it registers the CUDA / HIP
# kernels from static initialisers, and the linker would drop it.
function(quantd_third_party_torch name)
  add_library(${name} INTERFACE)
  target_link_libraries(${name} INTERFACE ${TORCH_LIBRARIES})
  target_include_directories(${name} SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
  if(QUANTD_TORCH_GPU_LIBRARIES)
    target_link_libraries(${name} INTERFACE "-Wl,--no-as-needed" ${QUANTD_TORCH_GPU_LIBRARIES}
                                            "-Wl,--as-needed")
  endif()
endfunction()

function(quantd_alias name actual)
  add_library(${name} INTERFACE)
  target_link_libraries(${name} INTERFACE ${actual})
endfunction()

# Bazel's import roots for protos: this repository's proto/ folder and the
# two external repositories of WORKSPACE.
function(_quantd_proto_root out path)
  if(path STREQUAL "proto")
    set(${out} "${QUANTD_SOURCE_DIR}/proto" PARENT_SCOPE)
  elseif(path STREQUAL "external/googleapis_protos")
    set(${out} "${QUANTD_GOOGLEAPIS_PROTO_DIR}" PARENT_SCOPE)
  elseif(path STREQUAL "external/grpc_protos")
    set(${out} "${QUANTD_GRPC_PROTO_DIR}" PARENT_SCOPE)
  else()
    message(FATAL_ERROR "quantd: unknown proto root ${path}")
  endif()
endfunction()

# quantd_cc_proto (proto/cc_proto.bzl): protoc (+ grpc_cpp_plugin) into
# <build>/proto_gen, so that "quantd/v1/job.pb.h" resolves as in Bazel.
function(quantd_proto_library name)
  cmake_parse_arguments(A "GRPC" "" "PROTO_PATHS;PROTOS;DEPS" ${ARGN})
  set(gen "${CMAKE_BINARY_DIR}/proto_gen")
  file(MAKE_DIRECTORY "${gen}")
  set(args "")
  set(roots "")
  foreach(p IN LISTS A_PROTO_PATHS)
    _quantd_proto_root(root "${p}")
    list(APPEND roots "${root}")
    list(APPEND args "--proto_path=${root}")
  endforeach()
  set(outs "")
  set(inputs "")
  foreach(proto IN LISTS A_PROTOS)
    string(REGEX REPLACE "\\.proto$" "" base "${proto}")
    list(APPEND outs "${gen}/${base}.pb.cc" "${gen}/${base}.pb.h")
    if(A_GRPC)
      list(APPEND outs "${gen}/${base}.grpc.pb.cc" "${gen}/${base}.grpc.pb.h")
    endif()
    set(found "")
    foreach(root IN LISTS roots)
      if(NOT found AND EXISTS "${root}/${proto}")
        set(found "${root}/${proto}")
      endif()
    endforeach()
    if(NOT found)
      message(FATAL_ERROR "quantd: ${proto} not found under ${roots}")
    endif()
    list(APPEND inputs "${found}")
  endforeach()
  list(APPEND args "--cpp_out=${gen}")
  if(A_GRPC)
    list(APPEND args "--grpc_out=${gen}" "--plugin=protoc-gen-grpc=${QUANTD_GRPC_CPP_PLUGIN}")
  endif()
  add_custom_command(
    OUTPUT ${outs}
    COMMAND "${QUANTD_PROTOC}" ${args} ${A_PROTOS}
    DEPENDS ${inputs}
    COMMENT "protoc ${A_PROTOS}"
    VERBATIM)
  set(srcs ${outs})
  list(FILTER srcs INCLUDE REGEX "\\.cc$")
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC "${gen}")
  target_compile_options(${name} PRIVATE -Wno-unused-parameter)
  target_link_libraries(${name} PUBLIC ${A_DEPS})
endfunction()

function(quantd_cc_library name)
  cmake_parse_arguments(A "" "" "SRCS;HDRS;DEPS;COPTS;DEFINES;LINKOPTS" ${ARGN})
  _quantd_abs(srcs ${A_SRCS})
  _quantd_abs(hdrs ${A_HDRS})
  set(compiled ${srcs})
  list(FILTER compiled INCLUDE REGEX "\\.(cc|cpp|c)$")
  if(compiled)
    add_library(${name} STATIC ${srcs} ${hdrs})
    set(scope PUBLIC)
    # C++ only: CMakeLists.txt may add CUDA sources (nvcc has its own flags).
    target_compile_options(${name} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${A_COPTS}>")
  else()
    add_library(${name} INTERFACE)
    set(scope INTERFACE)
  endif()
  target_include_directories(${name} ${scope} "${QUANTD_SOURCE_DIR}")
  target_compile_definitions(${name} ${scope} ${A_DEFINES})
  target_link_libraries(${name} ${scope} ${A_DEPS} ${A_LINKOPTS})
endfunction()

# libstdc++ comes first in every binary's lookup order (a link option, so it
# precedes the objects): a pip LibTorch exports copies of some libstdc++
# symbols (it links parts of libstdc++ statically), and a call that binds to
# one of those copies can crash: std::filesystem::remove_all jumped to
# address 0 on PyTorch 2.11, so every job crashed as it removed its scratch
# folder. Two toolchains lose that order:
# - with --as-needed, the linker drops a shared libstdc++ the objects do not
#   yet reference when it is seen; hence --no-as-needed around it;
# - a compiler that has only libstdc++.a (the GPU image's /opt/gcc) appends
#   it after LibTorch, where every symbol LibTorch already defines stays
#   bound to LibTorch. There the system's shared runtime (libstdc++.so.6,
#   which LibTorch itself loads) is linked first instead.
# (A CMAKE_EXE_LINKER_FLAGS setting did not survive enable_language(CUDA).)
function(_quantd_cxx_runtime_first out)
  if(NOT DEFINED QUANTD_CXX_RUNTIME_FIRST)
    execute_process(COMMAND "${CMAKE_CXX_COMPILER}" -print-file-name=libstdc++.so
                    OUTPUT_VARIABLE so OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(IS_ABSOLUTE "${so}" AND EXISTS "${so}")
      set(runtime "-lstdc++")
    else()
      find_library(QUANTD_SHARED_LIBSTDCXX NAMES libstdc++.so.6)
      if(NOT QUANTD_SHARED_LIBSTDCXX)
        message(FATAL_ERROR "quantd: ${CMAKE_CXX_COMPILER} has no shared libstdc++ and none was "
                            "found on this system (libstdc++.so.6); install the libstdc++6 "
                            "package or use a compiler that ships one")
      endif()
      set(runtime "${QUANTD_SHARED_LIBSTDCXX}")
      message(STATUS "quantd: ${CMAKE_CXX_COMPILER} links libstdc++ statically; binaries link "
                     "${runtime} first")
    endif()
    set(QUANTD_CXX_RUNTIME_FIRST "SHELL:-Wl,--push-state,--no-as-needed ${runtime} -Wl,--pop-state"
        CACHE INTERNAL "")
  endif()
  set(${out} "${QUANTD_CXX_RUNTIME_FIRST}" PARENT_SCOPE)
endfunction()

function(quantd_cc_binary name)
  cmake_parse_arguments(A "" "" "SRCS;HDRS;DEPS;COPTS;DEFINES;LINKOPTS" ${ARGN})
  _quantd_abs(srcs ${A_SRCS})
  add_executable(${name} ${srcs})
  _quantd_cxx_runtime_first(runtime)
  target_link_options(${name} BEFORE PRIVATE "${runtime}")
  target_include_directories(${name} PRIVATE "${QUANTD_SOURCE_DIR}")
  target_compile_options(${name} PRIVATE ${A_COPTS})
  target_compile_definitions(${name} PRIVATE ${A_DEFINES})
  target_link_libraries(${name} PRIVATE ${A_DEPS} ${A_LINKOPTS})
endfunction()
