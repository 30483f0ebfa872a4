#include "models/mlp.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace meshrt {
namespace models {

absl::StatusOr<ModelOutputs> BuildMlp(GraphBuilder& b, const MlpOptions& o) {
  if (o.batch <= 0 || o.d_model <= 0 || o.d_ff <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("mlp: sizes must be positive (batch ", o.batch,
                                                   ", d_model ", o.d_model, ", d_ff ", o.d_ff,
                                                   ")"));
  }
  if (o.teacher_noise < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("mlp: teacher_noise must be >= 0, not ", o.teacher_noise));
  }
  const Dim batch{"batch", o.batch}, d_model{"d_model", o.d_model}, d_ff{"d_ff", o.d_ff};
  const Shape xs({batch, d_model});
  ModelOutputs m;

  if (o.feed_data) {
    m.inputs = b.Placeholder("x", xs);
    m.targets = b.Placeholder("target", xs);
  } else if (o.fixed_data) {
    // One batch drawn once on the workers and kept (non-trainable variables), as the PyTorch
    // peer's benchmark reuses one batch.
    Initializer normal;
    normal.kind = "normal";
    normal.seed = o.seed;
    m.inputs = b.Variable("x", xs, normal);
    normal.seed = o.seed + 1;
    m.targets = b.Variable("target", xs, normal);
  } else {
    m.data_step = DataStep(b);
    m.inputs = RandomNormal(b, xs, m.data_step, o.seed, 0, 1, "x");
    Initializer teacher_init;
    teacher_init.kind = "normal";
    teacher_init.stddev = 1.0f / std::sqrt(static_cast<float>(o.d_model));
    teacher_init.seed = o.seed;
    TensorRef teacher =
        b.Variable("teacher", Shape({d_model, {"d_teacher", o.d_model}}), teacher_init);
    TensorRef t =
        b.Einsum({m.inputs, teacher}, Shape({batch, {"d_teacher", o.d_model}}), "teacher/einsum");
    if (o.teacher_tanh) t = Elementwise(b, "tanh", {t}, "teacher/tanh");
    t = b.RenameDim(t, "d_teacher", "d_model", "teacher/out");
    if (o.teacher_noise > 0) {
      t = b.Add(t, RandomNormal(b, xs, m.data_step, o.seed + 1, 0, o.teacher_noise, "noise"),
                "teacher/noisy");
    }
    m.targets = t;
  }

  Initializer glorot;
  glorot.kind = "glorot_uniform";
  glorot.seed = o.seed;
  TensorRef w1 = b.Variable("w1", Shape({d_model, d_ff}), glorot);
  TensorRef w2 = b.Variable("w2", Shape({d_ff, d_model}), glorot);
  m.variables = {w1, w2};
  TensorRef h = b.Einsum({m.inputs, w1}, Shape({batch, d_ff}), "layer1");
  if (o.biases) {
    TensorRef b1 = b.Variable("b1", Shape({d_ff}));
    m.variables.push_back(b1);
    h = b.Add(h, b1, "layer1/bias");
  }
  h = b.Relu(h, "layer1/relu");
  TensorRef y = b.Einsum({h, w2}, xs, "layer2");
  if (o.biases) {
    TensorRef b2 = b.Variable("b2", Shape({d_model}));
    m.variables.push_back(b2);
    y = b.Add(y, b2, "layer2/bias");
  }
  m.output = y;
  if (o.input_gradient) m.keep_gradients.push_back(m.inputs);
  TensorRef err = b.Sub(y, m.targets, "error");
  m.loss = b.ReduceMean(b.Mul(err, err, "squared_error"), {}, "loss");
  if (!b.status().ok()) return b.status();
  return m;
}

}  // namespace models
}  // namespace meshrt
