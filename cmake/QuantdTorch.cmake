# Finds LibTorch for the CMake build: LIBTORCH_HOME (a vendor LibTorch 2.x:
# CUDA or ROCm release, or a pip wheel's torch/ folder) when set, else the
# system one (Debian's libtorch-dev 1.13 ships TorchConfig.cmake).
include_guard(GLOBAL)

set(LIBTORCH_HOME "$ENV{LIBTORCH_HOME}" CACHE PATH
    "LibTorch folder (include/, lib/, share/cmake/Torch); empty: the system LibTorch")
if(LIBTORCH_HOME)
  if(NOT EXISTS "${LIBTORCH_HOME}/share/cmake/Torch/TorchConfig.cmake")
    message(FATAL_ERROR "LIBTORCH_HOME=${LIBTORCH_HOME} has no share/cmake/Torch/TorchConfig.cmake; "
                        "point it at a LibTorch folder (for a pip wheel: "
                        "python -c 'import torch, os; print(os.path.dirname(torch.__file__))')")
  endif()
  set(Torch_DIR "${LIBTORCH_HOME}/share/cmake/Torch" CACHE PATH "" FORCE)
  find_package(Torch REQUIRED CONFIG NO_DEFAULT_PATH PATHS "${Torch_DIR}")
else()
  find_package(Torch REQUIRED)
endif()

# The engine links the system gRPC, protobuf and Abseil, built with the
# C++11 std::string ABI; a LibTorch built with the old ABI cannot share
# std::string with them.
if(TORCH_CXX_FLAGS MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  message(FATAL_ERROR
          "This LibTorch (${TORCH_INSTALL_PREFIX}) uses the pre-C++11 ABI "
          "(_GLIBCXX_USE_CXX11_ABI=0), but the system gRPC / protobuf / Abseil use the C++11 ABI. "
          "Use a cxx11-ABI LibTorch: the 'cxx11 ABI' LibTorch zip, or the torch/ folder of a "
          "pip wheel >= 2.7.")
endif()

# GPU backend libraries, linked outside --as-needed (see QuantdBazel.cmake).
set(QUANTD_TORCH_BACKEND "cpu")
set(QUANTD_TORCH_GPU_LIBRARIES "")
get_filename_component(_quantd_torch_lib_dir "${TORCH_LIBRARY}" DIRECTORY)
foreach(backend_lib IN ITEMS torch_cuda torch_hip)
  find_library(_quantd_${backend_lib} NAMES ${backend_lib} PATHS "${_quantd_torch_lib_dir}"
               NO_DEFAULT_PATH)
  if(_quantd_${backend_lib})
    list(APPEND QUANTD_TORCH_GPU_LIBRARIES "${_quantd_${backend_lib}}")
    if(backend_lib STREQUAL "torch_cuda")
      set(QUANTD_TORCH_BACKEND "cuda")
    else()
      set(QUANTD_TORCH_BACKEND "rocm")
    endif()
  endif()
endforeach()
message(STATUS "quantd: LibTorch ${Torch_VERSION} at ${TORCH_INSTALL_PREFIX} (backend ${QUANTD_TORCH_BACKEND})")
