"""cc_fuzz_test: a libFuzzer target run for a bounded time as a test.

The Bazel toolchain is gcc, so the test compiles the target itself with
clang++ -fsanitize=fuzzer,address,undefined (clang comes from
tools/install_deps.sh), then fuzzes for `seconds` starting from a committed
seed corpus. Any crash, sanitizer report, leak or timeout fails the test and
leaves the reproducer in the test's undeclared outputs. Sources must be
torch-free (header-only libraries from /usr/include are fine; system
libraries are linked with `linkopts`).

Inputs may be as large as `max_len` (1 MiB by default, the size of the
largest untrusted JSON the parsers meet in a job spec and then some), and
`dict` gives libFuzzer tokens to splice in; //tools/fuzz:nesting.dict
holds the brackets and keys that build deeply nested JSON.

Example (worker/io/safetensors/BUILD, beside the parser it fuzzes):
    load("//tools/fuzz:fuzz.bzl", "cc_fuzz_test")

    cc_fuzz_test(
        name = "safetensors_header_fuzz_test",
        fuzzer = "safetensors_header_fuzzer.cc",
        srcs = [":format_sources"],
        corpus = glob(["header_fuzz_corpus/*"]),
        dict = "//tools/fuzz:nesting.dict",
    )
"""

def cc_fuzz_test(
        name,
        fuzzer,
        srcs,
        corpus,
        seconds = 15,
        max_len = 1048576,
        dict = None,
        copts = [],
        linkopts = [],
        size = "medium",
        **kwargs):
    """Declares an sh_test that builds and runs one libFuzzer target.

    Args:
      name: test name.
      fuzzer: the .cc file defining LLVMFuzzerTestOneInput.
      srcs: .cc and .h files (labels or filegroups) it links and includes;
        every .cc among them is compiled.
      corpus: seed inputs (files); their directory is the corpus.
      seconds: fuzzing time budget (-max_total_time).
      max_len: largest input libFuzzer generates (-max_len).
      dict: a libFuzzer dictionary file (-dict), or None.
      copts: extra clang++ flags.
      linkopts: extra link flags (system libraries, e.g. "-lre2").
      size: test size.
      **kwargs: passed to sh_test (tags, ...).
    """
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tools/fuzz:run_fuzzer.sh"],
        # Arguments are shell-tokenized: everything but the sources is a
        # --name=value flag, so that none can be empty.
        args = [
            "--seconds=%d" % seconds,
            "--max_len=%d" % max_len,
            "--fuzzer=$(rootpath %s)" % fuzzer,
        ] + ["--corpus=$(rootpath %s)" % corpus[0]] + (
            ["--dict=$(rootpath %s)" % dict] if dict else []
        ) + ["--copt=" + c for c in copts] + ["--linkopt=" + l for l in linkopts] + [
            "$(rootpaths %s)" % s
            for s in srcs
        ],
        data = [fuzzer] + srcs + corpus + ["//worker/common:status.h"] + ([dict] if dict else []),
        **kwargs
    )
