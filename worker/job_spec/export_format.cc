#include "worker/job_spec/export_format.h"

#include <utility>

namespace quantd::job_spec {
namespace {

constexpr std::pair<quantd::v1::ExportFormat, exporter::ExportFormat> kExportFormats[] = {
    {quantd::v1::HF_FAKE_QUANTIZED, exporter::ExportFormat::kHfFakeQuantized},
    {quantd::v1::HF_QUARK, exporter::ExportFormat::kHfQuark},
    {quantd::v1::GGUF, exporter::ExportFormat::kGguf},
    {quantd::v1::ONNX_QDQ, exporter::ExportFormat::kOnnxQdq},
    {quantd::v1::COMPRESSED_TENSORS, exporter::ExportFormat::kCompressedTensors},
    {quantd::v1::TORCHSCRIPT, exporter::ExportFormat::kTorchScript},
};

}  // namespace

std::optional<exporter::ExportFormat> ExportFormatFromProto(int format) {
  for (const auto& [proto, engine] : kExportFormats)
    if (proto == format) return engine;
  return std::nullopt;
}

quantd::v1::ExportFormat ExportFormatToProto(exporter::ExportFormat format) {
  for (const auto& [proto, engine] : kExportFormats)
    if (engine == format) return proto;
  return quantd::v1::EXPORT_FORMAT_UNSPECIFIED;
}

}  // namespace quantd::job_spec
