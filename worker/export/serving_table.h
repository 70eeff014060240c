// The table of presets x export formats x consumers in docs/export.md,
// generated from the rules the suite holds to each consumer: vLLM
// (serving_target.h, checked by tests/peers/vllm_quark_peer_test.sh and
// vllm_ct_peer_test.sh),
// llama.cpp and onnxruntime (export_support.h, checked by the gguf and onnx
// peer tests). //worker/export:serving_table_test keeps the doc equal to it;
// `bazel run //worker/export:serving_table` prints it. Torch-free.
#ifndef QUANTD_WORKER_EXPORT_SERVING_TABLE_H_
#define QUANTD_WORKER_EXPORT_SERVING_TABLE_H_

#include <string>

namespace quantd::exporter {

// Markdown: one row per preset; then, for the presets vLLM refuses as
// hf_quark at Llama-3-8B's shapes, why.
std::string ServingTableMarkdown();

}  // namespace quantd::exporter

#endif  // QUANTD_WORKER_EXPORT_SERVING_TABLE_H_
