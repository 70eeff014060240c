// The table of architectures (and rope scaling types) x export formats x
// rotation in docs/worker.md, generated from the rules CreateJob applies:
// CheckArchitectureSupport (export_support.h) and
// RotationArchitectureProblem (worker/algo/algorithm_support.h), on a
// representative config.json of each architecture.
// //worker/export:architecture_table_test keeps the doc equal to it; `bazel
// run //worker/export:architecture_table` prints it. Torch-free.
#ifndef QUANTD_WORKER_EXPORT_ARCHITECTURE_TABLE_H_
#define QUANTD_WORKER_EXPORT_ARCHITECTURE_TABLE_H_

#include <string>

namespace quantd::exporter {

// Markdown: one row per supported architecture, then one per rope_scaling
// type on a Llama config; "yes" or "no" per export format and rotation.
std::string ArchitectureTableMarkdown();

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_ARCHITECTURE_TABLE_H_
