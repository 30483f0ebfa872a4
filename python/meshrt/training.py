"""Optimizers and learning-rate schedules, as a training request (proto TrainingSpec).

The coordinator adds the gradients (autodiff) and the optimizer's updates to the graph before it
lowers it — the same code as the C++ builder's Minimize (core/train/optimizers.h says what each
hyper-parameter means and which values are refused)::

    session = cluster.session(g, mesh="x:2", layout="batch:x", loss=loss,
                              optimizer=meshrt.training.adam(0.001, schedule="linear_warmup",
                                                             warmup_steps=100))
    curve = session.train(steps=200)

Every run of a training session is one step: it reads its data (feeds, or the workers' own data
ops), computes the loss and its gradients, and updates the variables.
"""

from meshrt.errors import InvalidArgumentError

_KINDS = ("sgd", "momentum", "adam", "adamw", "adafactor")
_SCHEDULES = ("constant", "linear_warmup", "rsqrt_decay")
_HYPER = ("momentum", "beta1", "beta2", "epsilon", "weight_decay", "adafactor_decay",
          "adafactor_epsilon", "adafactor_clip")


class Optimizer:
    """An optimizer with its hyper-parameters (use sgd(), momentum(), adam(), adamw(), adafactor()).

    ``learning_rate``: the base rate (0 = the default 0.01); ``schedule``: constant, linear_warmup
    or rsqrt_decay with ``warmup_steps``; ``clip_global_norm`` > 0 scales the gradients to that
    global norm at most; ``microbatches`` > 1 accumulates that many steps' gradients per update.
    Unset hyper-parameters keep core/train/optimizers.h's defaults.
    """

    def __init__(self, kind, learning_rate=0.0, schedule="constant", warmup_steps=0,
                 clip_global_norm=0.0, microbatches=1, **hyper):
        if kind not in _KINDS:
            raise InvalidArgumentError(f"optimizer '{kind}': use one of {', '.join(_KINDS)}")
        if schedule not in _SCHEDULES:
            raise InvalidArgumentError(
                f"learning-rate schedule '{schedule}': use one of {', '.join(_SCHEDULES)}")
        for key in hyper:
            if key not in _HYPER:
                raise InvalidArgumentError(
                    f"optimizer {kind}: unknown hyper-parameter '{key}' (known: {', '.join(_HYPER)})")
        self.kind = kind
        self.learning_rate = float(learning_rate)
        self.schedule = schedule
        self.warmup_steps = int(warmup_steps)
        self.clip_global_norm = float(clip_global_norm)
        self.microbatches = int(microbatches)
        self.hyper = {k: float(v) for k, v in hyper.items() if v is not None}

    def spec(self, loss, variables=None, keep_gradients=None):
        """The meshrt.v1.TrainingSpec of minimizing ``loss`` (a Tensor or name) over ``variables``
        (names or Tensors; None = every float32 variable)."""
        from meshrt._proto import session_pb2

        def name(t):
            return t if isinstance(t, str) else t.name
        s = session_pb2.TrainingSpec(loss=name(loss), optimizer=self.kind)
        s.variables.extend(name(v) for v in (variables or []))
        s.learning_rate.kind = self.schedule
        s.learning_rate.base = self.learning_rate
        s.learning_rate.warmup_steps = self.warmup_steps
        for key, value in self.hyper.items():
            setattr(s, key, value)
        s.clip_global_norm = self.clip_global_norm
        s.microbatches = self.microbatches if self.microbatches > 1 else 0
        s.keep_gradients.extend(name(t) for t in (keep_gradients or []))
        return s

    def __repr__(self):
        return (f"Optimizer({self.kind!r}, learning_rate={self.learning_rate}, "
                f"schedule={self.schedule!r}, {self.hyper})")


def sgd(learning_rate=0.01, **options):
    """Plain gradient descent."""
    return Optimizer("sgd", learning_rate, **options)


def momentum(learning_rate=0.01, momentum=None, **options):
    """SGD with momentum (``momentum``, default core/train/optimizers.h's)."""
    return Optimizer("momentum", learning_rate, momentum=momentum, **options)


def adam(learning_rate=0.001, beta1=None, beta2=None, epsilon=None, **options):
    """Adam."""
    return Optimizer("adam", learning_rate, beta1=beta1, beta2=beta2, epsilon=epsilon, **options)


def adamw(learning_rate=0.001, weight_decay=None, beta1=None, beta2=None, epsilon=None, **options):
    """Adam with decoupled weight decay."""
    return Optimizer("adamw", learning_rate, weight_decay=weight_decay, beta1=beta1, beta2=beta2,
                     epsilon=epsilon, **options)


def adafactor(learning_rate=0.01, adafactor_decay=None, adafactor_epsilon=None,
              adafactor_clip=None, **options):
    """Adafactor (factored second moments)."""
    return Optimizer("adafactor", learning_rate, adafactor_decay=adafactor_decay,
                     adafactor_epsilon=adafactor_epsilon, adafactor_clip=adafactor_clip, **options)


class ReferenceTraining:
    """Training steps in the single-process reference interpreter (no cluster): the graph the
    coordinator would train (:func:`reference_training`), run step by step with its variables
    carried from one step to the next. ``graph`` (the trained Graph), ``loss``, ``learning_rate``,
    ``global_norm``, ``global_step`` (tensor names), ``variables`` ({name: array} after the last
    step; empty before the first: every variable starts from its initializer), ``step``."""

    def __init__(self, graph, outputs):
        self.graph = graph
        self.loss = outputs.loss
        self.learning_rate = outputs.learning_rate
        self.global_norm = outputs.global_norm
        self.global_step = outputs.global_step
        self.variables = {}
        self.step = 0

    def train(self, steps, feeds=None, fetches=None):
        """Runs ``steps`` steps and returns [(step, loss)] of each, as Session.train(log_every=1)
        does; with ``fetches`` (names or Tensors), [(step, loss, [arrays])]."""
        extra = [f if isinstance(f, str) else f.name for f in (fetches or [])]
        curve = []
        for _ in range(int(steps)):
            out, self.variables = self.graph.evaluate(feeds, [self.loss] + extra, self.variables)
            self.step += 1
            loss = float(out[self.loss])
            curve.append((self.step, loss, [out[n] for n in extra]) if extra
                         else (self.step, loss))
        return curve


def reference_training(graph, loss, optimizer, variables=None, keep_gradients=None):
    """A :class:`ReferenceTraining` of ``graph`` (a meshrt Graph) minimizing ``loss`` with
    ``optimizer`` over ``variables`` (default: the graph's trainable variables): the gradient and
    update ops added by the same code as a training session's on the coordinator
    (core/train/training_spec.h AddTraining, through meshrt._core), so its losses are a cluster's
    on any mesh and layout (up to float rounding)."""
    from meshrt import _native
    from meshrt._proto import session_pb2
    from meshrt.errors import check
    from meshrt.graph import Graph
    if not isinstance(optimizer, Optimizer):
        raise InvalidArgumentError("optimizer must be a meshrt.training optimizer, e.g. "
                                   "meshrt.training.adam(0.001)")
    if variables is None:
        variables = graph.trainable_variables()
    spec = optimizer.spec(loss, variables, keep_gradients)
    trained, outputs = check(_native.core().add_training(graph.serialize(),
                                                         spec.SerializeToString()))
    return ReferenceTraining(Graph.from_proto(trained),
                             session_pb2.TrainingOutputs.FromString(outputs))
