#include "worker/export/hf/quantized_safetensors.h"

#include <c10/util/Exception.h>

#include <vector>

#include "worker/common/cancellation.h"
#include "worker/export/module_names.h"
#include "worker/io/safetensors/tensor_io.h"

namespace quantd::exporter {

Status WriteTensor(ShardedSafetensorsWriter& w, const std::string& who, const std::string& name,
                   const at::Tensor& t, io::SafetensorsDtype dtype) {
  try {
    at::Tensor c = t.to(at::kCPU).contiguous();
    if (io::SafetensorsDtypeSize(dtype) != static_cast<int>(c.element_size()))
      return InternalError(who + name + " has " + std::to_string(c.element_size()) +
                           "-byte elements, not " + io::SafetensorsDtypeName(dtype));
    return w.Add(name, dtype, c.sizes().vec(), c.data_ptr(),
                 static_cast<uint64_t>(c.numel()) * c.element_size());
  } catch (const c10::Error& e) {
    return InternalError(who + "writing " + name + ": " + e.what_without_backtrace());
  }
}

StatusOr<Artifact> ExportQuantizedSafetensors(const QuantizedModel& model,
                                              const QuantizedSafetensorsLayout& layout,
                                              const QuantizedSafetensorsOptions& options,
                                              const ExportProgress& progress) {
  const std::string& who = layout.who;
  QD_ASSIGN_OR_RETURN(StagedDirectory staged,
                      StagedDirectory::Create(options.output_dir, options.overwrite,
                                              options.output_owner));
  const std::string dir = staged.staging_path();
  ShardedSafetensorsWriter writer(dir, options.max_shard_bytes);

  const io::TensorSource& original = model.original();
  const std::vector<std::string> names = original.Names();
  int done = 0;
  for (const std::string& name : names) {
    if (StopRequested()) return CancelledStatus("exporting " + name);
    const io::TensorInfo* info = original.Find(name);
    if (info == nullptr) return InternalError(who + name + " vanished from the input");
    const std::string module = ModuleOf(name, ".weight");
    const QuantizedLayer* layer = module.empty() ? nullptr : model.FindLayer(module);
    QD_ASSIGN_OR_RETURN(at::Tensor value, model.Load(name));
    if (value.sizes().vec() != info->shape)
      return InternalError(who + name + " changed shape after quantization");
    if (layer != nullptr && layer->weight) {
      QD_RETURN_IF_ERROR(layout.write_weight(writer, module, value, *layer));
    } else {
      const io::SafetensorsDtype st = io::KeptSafetensorsDtype(info->dtype);
      QD_ASSIGN_OR_RETURN(at::ScalarType scalar, io::StorageScalarType(st));
      at::Tensor t;
      try {
        t = value.to(scalar);
      } catch (const c10::Error& e) {
        return InternalError(who + name + ": " + e.what_without_backtrace());
      }
      QD_RETURN_IF_ERROR(WriteTensor(writer, who, name, t, st));
    }
    if (layer != nullptr) QD_RETURN_IF_ERROR(layout.write_module_extras(writer, module, *layer));
    if (progress) progress(++done, static_cast<int>(names.size()));
  }
  QD_ASSIGN_OR_RETURN(std::string main_file, writer.Finish());
  QD_RETURN_IF_ERROR(WriteHfConfig(model.model_dir(), dir, layout.quantization_config,
                                   model.config().tie_word_embeddings));
  QD_RETURN_IF_ERROR(CopyHfSideFiles(model.model_dir(), dir));
  QD_RETURN_IF_ERROR(staged.Commit());
  return DescribeArtifact(layout.format, staged, main_file);
}

}  // namespace quantd::exporter
