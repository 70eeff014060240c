"""Generates @libtorch: Debian's CPU LibTorch 1.13, or a vendor LibTorch 2.x.

Without LIBTORCH_HOME the wrapper links the system libraries from libtorch-dev
(/usr/include, /usr/lib/<triple>). With LIBTORCH_HOME (a CUDA or ROCm release,
or the torch/ folder of a pip wheel: include/, lib/, share/cmake/Torch) it
symlinks that tree and links its libraries. QUANTD_TORCH_BACKEND=cuda|rocm
(set by --config=cuda / --config=rocm) adds libtorch_cuda / libtorch_hip
outside --as-needed, because nothing references their symbols directly and
the linker would otherwise drop the GPU backend.
"""

def _cxx11_abi_define(ctx, home):
    # TorchConfig.cmake records the ABI the library was built with; a mismatch
    # breaks every std::string crossing the boundary, so follow it.
    cfg = ctx.path(home + "/share/cmake/Torch/TorchConfig.cmake")
    if not cfg.exists:
        return []
    text = ctx.read(cfg)
    if "_GLIBCXX_USE_CXX11_ABI=0" in text:
        return ["_GLIBCXX_USE_CXX11_ABI=0"]
    return []

def _libtorch_configure_impl(ctx):
    home = ctx.os.environ.get("LIBTORCH_HOME", "")
    backend = ctx.os.environ.get("QUANTD_TORCH_BACKEND", "cpu")
    if backend not in ["cpu", "cuda", "rocm"]:
        fail("QUANTD_TORCH_BACKEND must be cpu, cuda or rocm, got '%s'" % backend)
    gpu_libs = {"cpu": [], "cuda": ["-ltorch_cuda", "-lc10_cuda"], "rocm": ["-ltorch_hip", "-lc10_hip"]}[backend]

    if not home:
        if backend != "cpu":
            fail("--config=%s needs LIBTORCH_HOME pointing at a %s LibTorch (include/, lib/, share/cmake/Torch)" % (backend, backend))
        ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# Debian libtorch-dev 1.13 (CPU). Headers are in /usr/include.
cc_library(
    name = "libtorch",
    linkopts = ["-ltorch", "-ltorch_cpu", "-lc10"],
)

""")
        ctx.file("torch_info.bzl", 'TORCH_BACKEND = "cpu"\nTORCH_HOME = ""\n')
        return

    if not ctx.path(home + "/include/ATen/ATen.h").exists:
        fail("LIBTORCH_HOME=%s has no include/ATen/ATen.h; point it at a LibTorch folder" % home)
    ctx.symlink(home + "/include", "include")
    lib = home + "/lib"
    defines = _cxx11_abi_define(ctx, home)
    # libstdc++ ahead of LibTorch in the binary's lookup order: a pip
    # LibTorch exports its own copies of some libstdc++ symbols (it links
    # parts of libstdc++ statically), and a call bound to one of those
    # (std::filesystem::remove_all) jumped to address 0 on PyTorch 2.11.
    linkopts = ["-L" + lib, "-Wl,-rpath," + lib, "-Wl,--no-as-needed", "-lstdc++", "-Wl,--as-needed"]
    if gpu_libs:
        linkopts += ["-Wl,--no-as-needed"] + gpu_libs + ["-Wl,--as-needed"]
    linkopts += ["-ltorch", "-ltorch_cpu", "-lc10"]
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# Vendor LibTorch from {home} (backend: {backend}).
cc_library(
    name = "libtorch",
    hdrs = glob(["include/ATen/**", "include/c10/**", "include/torch/**", "include/caffe2/**"], allow_empty = True),
    includes = ["include", "include/torch/csrc/api/include"],
    defines = {defines},
    linkopts = {linkopts},
)
""".format(home = home, backend = backend, defines = repr(defines), linkopts = repr(linkopts)))
    ctx.file("torch_info.bzl", 'TORCH_BACKEND = "%s"\nTORCH_HOME = "%s"\n' % (backend, home))

libtorch_configure = repository_rule(
    implementation = _libtorch_configure_impl,
    environ = ["LIBTORCH_HOME", "QUANTD_TORCH_BACKEND"],
    local = True,
)
