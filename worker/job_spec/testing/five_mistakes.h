// The structured quantization config with five mistakes that the job spec
// tests refuse at two depths (ResolveQuantizationSettings and
// CheckJobSpec), in protobuf text: the body of a QuantizationSettings
// message. Each mistake names its own field.
#ifndef QUANTD_WORKER_JOB_SPEC_TESTING_FIVE_MISTAKES_H_
#define QUANTD_WORKER_JOB_SPEC_TESTING_FIVE_MISTAKES_H_

namespace quantd::job_spec::testing {

inline constexpr char kFiveMistakesSettings[] = R"pb(
  config {
    global_quant_config {
      weight { qscheme: PER_CHANNEL }
      input_tensors { dtype: INT8 qscheme: PER_GROUP group_size: 32 }
    }
    layer_type_quant_config {
      layer_type: "Linaer"
      config { weight { dtype: INT8 } }
    }
    layer_quant_config {
      pattern: "*down_proj"
      config { weight { dtype: MXFP4 symmetric: false } }
    }
    layer_quant_config {
      pattern: "*up_proj"
      config { weight { dtype: INT4 qscheme: PER_GROUP group_size: -16 } }
    }
  }
)pb";

}  // namespace quantd::job_spec::testing

#endif  // QUANTD_WORKER_JOB_SPEC_TESTING_FIVE_MISTAKES_H_
