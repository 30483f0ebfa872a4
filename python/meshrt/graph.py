"""The graph builder: mesh graphs in Python, checked by meshrt's C++ core as they are built.

    import meshrt as mr
    g = mr.Graph()
    batch, d_in, hidden = mr.Dimension("batch", 8), mr.Dimension("d_in", 16), mr.Dimension("hidden", 32)
    x = g.placeholder("x", [batch, d_in])
    w = g.variable("w", [d_in, hidden], mr.initializers.glorot_uniform(seed=1))
    h = g.relu(g.einsum([x, w], [batch, hidden]))      # a product, summed over d_in
    g.mark_output(g.reduce_sum(h, ["hidden"], name="s"))

Each method adds one op and returns a :class:`Tensor` (its name, named shape and dtype). Shapes are
inferred by the C++ core (the same code the coordinator validates with), so a mistake raises
:class:`meshrt.InvalidArgumentError` naming the op at the line that makes it. Elementwise ops
broadcast by dimension *name*; ``einsum`` multiplies its inputs and sums every dim not in its output
shape. Every op ``meshrt ops`` lists is a method: those without a method of their own take
``(*inputs, name=None, shape=None, dims=None, dtype=None, **attrs)`` (see :meth:`Graph.op`).
Automatic names (``relu_0``, ``einsum_1``, ...) are made as the C++ GraphBuilder makes them, so a
graph built the same way in either language serializes to the same bytes.
"""

import contextlib

import numpy as np

from meshrt import _native
from meshrt.errors import InvalidArgumentError, NotFoundError, check
from meshrt.shapes import Dimension, Shape, as_shape
from meshrt import tensors as _tensors


class Tensor:
    """A handle to a tensor of a :class:`Graph`: ``name``, ``shape`` (a Shape), ``dtype``.

    Arithmetic builds ops: ``a + b``, ``a - b``, ``a * b``, ``a / b`` (broadcast by name), ``-a``,
    and with a Python number ``a * 2.0`` (the ``scalar`` form of the op).
    """

    __slots__ = ("graph", "name", "shape", "dtype")

    def __init__(self, graph, name, shape, dtype):
        self.graph = graph
        self.name = name
        self.shape = shape
        self.dtype = dtype

    def __repr__(self):
        return f"Tensor('{self.name}', [{self.shape}], {self.dtype})"

    def _binary(self, type_, other, reverse=False):
        if isinstance(other, Tensor):
            x, y = (other, self) if reverse else (self, other)
            return self.graph.op(type_, x, y)
        if isinstance(other, (int, float, np.floating, np.integer)) and not isinstance(other, bool):
            if reverse and type_ in ("sub", "div"):
                # s - x = -(x - s); s / x = s * x^-1
                if type_ == "sub":
                    return self.graph.neg(self.graph.op("sub", self, scalar=float(other)))
                return self.graph.op("mul", self.graph.op("reciprocal", self), scalar=float(other))
            return self.graph.op(type_, self, scalar=float(other))
        return NotImplemented

    def __add__(self, o):
        return self._binary("add", o)

    def __radd__(self, o):
        return self._binary("add", o, True)

    def __sub__(self, o):
        return self._binary("sub", o)

    def __rsub__(self, o):
        return self._binary("sub", o, True)

    def __mul__(self, o):
        return self._binary("mul", o)

    def __rmul__(self, o):
        return self._binary("mul", o, True)

    def __truediv__(self, o):
        return self._binary("div", o)

    def __rtruediv__(self, o):
        return self._binary("div", o, True)

    def __neg__(self):
        return self.graph.neg(self)


def _attr(value, proto):
    """Sets AttrValue ``proto`` from a Python value (bool, int, float, str or a list of one)."""
    if isinstance(value, bool):
        proto.b = value
    elif isinstance(value, (int, np.integer)):
        proto.i = int(value)
    elif isinstance(value, (float, np.floating)):
        proto.f = float(value)
    elif isinstance(value, str):
        proto.s = value
    elif isinstance(value, (list, tuple)):
        items = list(value)
        if all(isinstance(v, str) for v in items):
            proto.strings.values.extend(items)
        elif all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
            proto.ints.values.extend(int(v) for v in items)
        elif all(isinstance(v, (int, float, np.integer, np.floating)) for v in items):
            proto.floats.values.extend(float(v) for v in items)
        else:
            raise InvalidArgumentError(f"attribute list {value!r} mixes kinds")
    else:
        raise InvalidArgumentError(
            f"attribute value {value!r}: use a bool, int, float, str or a list of one kind")


def _dim_names(dims):
    if dims is None:
        return []
    if isinstance(dims, (str, Dimension)):
        dims = [dims]
    return [d.name if isinstance(d, Dimension) else str(d) for d in dims]


class Graph:
    """A mesh graph under construction (see the module's doc). Not thread-safe."""

    def __init__(self):
        from meshrt._proto import graph_pb2
        self._graph_pb2 = graph_pb2
        self._proto = graph_pb2.Graph()
        self._types = {}     # name -> (Shape, dtype)
        self._counters = {}  # op type -> next automatic suffix
        self._scope = ""     # prefix of the names of new ops (name_scope)
        self._reuse = False  # variable() returns existing variables (reuse_variables)

    # ---- the graph -------------------------------------------------------------------------------

    @classmethod
    def from_proto(cls, proto):
        """A Graph holding the ops of ``proto`` (a meshrt.v1.Graph or its serialized bytes, e.g.
        one the C++ builder made: models.encdec_decoder), each checked and its type inferred as
        if added here; its outputs are kept. More ops can be added to it."""
        g = cls()
        if isinstance(proto, (bytes, bytearray)):
            proto = g._graph_pb2.Graph.FromString(bytes(proto))
        for op in proto.ops:
            copy = g._graph_pb2.Op()
            copy.CopyFrom(op)
            del copy.inputs[:]
            inputs = []
            for name in op.inputs:
                if name not in g._types:
                    raise InvalidArgumentError(
                        f"op '{op.name}' ({op.type}) reads '{name}', which no op before it makes")
                inputs.append(g.find(name))
            g._apply(copy, inputs, op.name)
        g.mark_output(*proto.outputs)
        return g

    def to_proto(self):
        """The meshrt.v1.Graph message (a copy)."""
        g = self._graph_pb2.Graph()
        g.CopyFrom(self._proto)
        return g

    def serialize(self):
        """The graph as serialized meshrt.v1.Graph bytes."""
        return self._proto.SerializeToString()

    def validate(self):
        """Checks the whole graph as the coordinator will (cycles, state rules, outputs)."""
        check(_native.core().check_graph(self.serialize()))
        return self

    def find(self, name):
        """The Tensor called ``name``; NotFoundError when the graph has none."""
        if name not in self._types:
            raise NotFoundError(f"the graph has no tensor '{name}'")
        shape, dtype = self._types[name]
        return Tensor(self, name, shape, dtype)

    def __contains__(self, name):
        return (name.name if isinstance(name, Tensor) else name) in self._types

    @property
    def outputs(self):
        """The names marked as outputs (what a run fetches by default)."""
        return list(self._proto.outputs)

    def mark_output(self, *tensors):
        """Marks tensors as graph outputs (once each, however often asked). Returns the first."""
        for t in tensors:
            name = t.name if isinstance(t, Tensor) else t
            self.find(name)
            if name not in self._proto.outputs:
                self._proto.outputs.append(name)
        return tensors[0] if tensors else None

    @contextlib.contextmanager
    def name_scope(self, scope):
        """Within the block, an op named N (not a variable or placeholder: checkpoints and feeds
        refer to those) is called ``<scope>/N``, and an op without a name ``<scope>/<type>``
        (then ``<scope>/<type>_1``, ...); scopes nest, as Mesh-TensorFlow names ops
        ("layer_0/attention/q"). E.g. the Transformer's eval pass builds its ops as "eval/..."
        (models.transformer_lm)."""
        outer = self._scope
        self._scope = f"{outer}{scope}/"
        try:
            yield self
        finally:
            self._scope = outer

    @contextlib.contextmanager
    def reuse_variables(self):
        """Within the block, :meth:`variable` returns the existing variable of that name (same
        shape and dtype, else InvalidArgumentError; NotFoundError when there is none) instead of
        adding one: layers called again share their weights."""
        outer = self._reuse
        self._reuse = True
        try:
            yield self
        finally:
            self._reuse = outer

    def variables(self):
        """The names of the graph's variables, in creation order."""
        return [op.name for op in self._proto.ops if op.type == "variable"]

    def trainable_variables(self):
        """The float32 variables the graph does not update itself (no assign or assign_add of its
        own reads them as its target): what training changes by default."""
        updated = {op.inputs[0] for op in self._proto.ops
                   if op.type in ("assign", "assign_add") and op.inputs}
        return [op.name for op in self._proto.ops if op.type == "variable"
                and op.name not in updated and self._types[op.name][1] == "float32"]

    def placeholders(self):
        """{name: Tensor} of the graph's placeholders."""
        return {op.name: self.find(op.name) for op in self._proto.ops if op.type == "placeholder"}

    @staticmethod
    def registered_ops():
        """Every op type of the language: a list of dicts (type, family, min_inputs, max_inputs,
        differentiable, summary, collectives), as ``meshrt ops`` prints them."""
        return _native.core().ops()

    def evaluate(self, feeds=None, fetches=None, variables=None):
        """Runs one step in the single-process reference interpreter (no cluster).

        ``feeds``: {placeholder name or Tensor: array}; ``fetches``: names or Tensors (default: the
        outputs); ``variables``: {name: array} values held from an earlier step (missing ones start
        from their initializers). Returns ``(fetched, variables_after)``, dicts of numpy arrays.
        """
        feed_protos = {}
        for key, value in (feeds or {}).items():
            t = self.find(key.name if isinstance(key, Tensor) else key)
            feed_protos[t.name] = _tensors.to_proto(value, t.shape, t.dtype,
                                                    f"feed '{t.name}'").SerializeToString()
        var_protos = {}
        for name, value in (variables or {}).items():
            t = self.find(name)
            var_protos[name] = _tensors.to_proto(value, t.shape, t.dtype,
                                                 f"variable '{name}'").SerializeToString()
        names = _fetch_names(fetches, self.outputs)
        fetched, after = check(_native.core().interpret(self.serialize(), feed_protos, names,
                                                        var_protos))
        return _from_protos(fetched), _from_protos(after)

    # ---- the generic op --------------------------------------------------------------------------

    def op(self, type_, *inputs, name=None, shape=None, dims=None, dtype=None, value=None,
           body=None, attrs=None, **more_attrs):
        """Adds one op of any registered ``type_`` and returns its output.

        ``inputs``: Tensors. ``shape``: the op's shape field (a Shape or anything as_shape takes),
        ``dims``: its dims field (names), ``dtype``: its dtype field, ``value``: a TensorValue for
        ``constant``, ``body``: a Graph for ``while_loop``; every other keyword is an attribute (bool,
        int, float, str or a list; pass float attributes as floats), as is every entry of the dict
        ``attrs`` (for attributes called like a parameter, e.g. cast's "dtype"). The op's
        conventions are in ``meshrt ops`` and core/ops*.h.
        """
        attrs = dict(attrs or {}, **more_attrs)
        op = self._graph_pb2.Op(type=type_)
        if shape is not None:
            op.shape.CopyFrom(as_shape(shape).to_proto())
        op.dims.extend(_dim_names(dims))
        if dtype is not None:
            op.dtype = _tensors.dtype_proto(dtype)
        if value is not None:
            op.value.CopyFrom(value)
        if body is not None:
            op.body.CopyFrom(body.to_proto() if isinstance(body, Graph) else body)
        for key in sorted(attrs):
            if attrs[key] is not None:
                _attr(attrs[key], op.attrs[key])
        return self._apply(op, list(inputs), name)

    def _apply(self, op, inputs, name):
        scoped = self._scope and op.type not in ("variable", "placeholder")
        if name and scoped:
            name = self._scope + name
        if not name:
            # "<type>_N" outside a scope; "<scope>/<type>", then "<scope>/<type>_1", ... inside
            # (as the C++ GraphBuilder names them).
            base = self._scope + op.type if scoped else op.type
            while True:
                n = self._counters.get(base, 0)
                self._counters[base] = n + 1
                name = f"{base}_{n}" if not scoped else (base if n == 0 else f"{base}_{n}")
                if name not in self._types:
                    break
        if name in self._types:
            raise InvalidArgumentError(f"two ops are called '{name}'; op names must be unique")
        op.name = name
        input_types = []
        for t in inputs:
            if not isinstance(t, Tensor):
                raise InvalidArgumentError(
                    f"op '{name}' ({op.type}): input {t!r} is not a Tensor of a Graph")
            if t.graph is not self or t.name not in self._types:
                raise InvalidArgumentError(
                    f"op '{name}' ({op.type}) reads '{t.name}', which this graph did not make")
            op.inputs.append(t.name)
            shape, dtype = self._types[t.name]
            input_types.append((shape.to_proto().SerializeToString(), _tensors.dtype_proto(dtype)))
        out_shape, out_dtype = check(_native.core().infer(op.SerializeToString(), input_types))
        from meshrt._proto import tensor_pb2
        shape = Shape.from_proto(tensor_pb2.Shape.FromString(out_shape))
        dtype = _tensors.dtype_name(out_dtype)
        self._types[name] = (shape, dtype)
        self._proto.ops.append(op)
        return Tensor(self, name, shape, dtype)

    def __getattr__(self, type_):
        # Every registered op without a method of its own: g.sigmoid(x), g.greater(a, b), ...
        if type_.startswith("_") or type_ not in _native.op_types():
            raise AttributeError(f"Graph has no method or op '{type_}' (see meshrt ops)")

        def method(*inputs, **kwargs):
            return self.op(type_, *inputs, **kwargs)
        method.__name__ = type_
        method.__doc__ = _native.op_summary(type_)
        return method

    # ---- sources and state -----------------------------------------------------------------------

    def placeholder(self, name, shape, dtype="float32"):
        """A tensor fed at run time (its name is the feed's key)."""
        if not name:
            raise InvalidArgumentError("a placeholder needs a name (feeds refer to it)")
        op = self._graph_pb2.Op(type="placeholder", dtype=_tensors.dtype_proto(dtype))
        op.shape.CopyFrom(as_shape(shape).to_proto())
        return self._apply(op, [], name)

    def variable(self, name, shape, initializer=None, dtype="float32"):
        """State kept on the workers between steps, started by ``initializer`` (default zeros;
        see meshrt.initializers: a random one is layout-invariant, keyed on its seed and name)."""
        if not name:
            raise InvalidArgumentError("a variable needs a name (checkpoints refer to it)")
        if self._reuse:
            v = self.find(name)
            want = (as_shape(shape), _tensors.dtype_name(dtype))
            if (v.shape, v.dtype) != want:
                raise InvalidArgumentError(
                    f"reused variable '{name}' is {v.dtype}[{v.shape}], not {want[1]}[{want[0]}]")
            return v
        from meshrt.initializers import Initializer, zeros
        init = initializer if initializer is not None else zeros()
        if not isinstance(init, Initializer):
            raise InvalidArgumentError(
                f"variable '{name}': initializer must be a meshrt.initializers.Initializer")
        op = self._graph_pb2.Op(type="variable", dtype=_tensors.dtype_proto(dtype))
        op.shape.CopyFrom(as_shape(shape).to_proto())
        init.fill(op)
        return self._apply(op, [], name)

    def assign(self, var, value, name=None):
        """After the step, ``var`` holds ``value``. Returns the new value."""
        return self.op("assign", var, value, name=name)

    def assign_add(self, var, delta, name=None):
        """After the step, ``var`` holds var + ``delta``."""
        return self.op("assign_add", var, delta, name=name)

    def constant(self, array, shape, dtype=None, name=None):
        """A constant tensor of the named ``shape`` holding ``array``."""
        value = _tensors.to_proto(array, shape, dtype, f"constant '{name or 'constant'}'")
        return self.op("constant", value=value, name=name)

    def zeros(self, shape, dtype=None, name=None):
        """A tensor of ``shape`` filled with 0."""
        return self.op("zeros", shape=shape, dtype=dtype, name=name)

    def ones(self, shape, dtype=None, name=None):
        """A tensor of ``shape`` filled with 1."""
        return self.op("ones", shape=shape, dtype=dtype, name=name)

    def range(self, dim, name=None):
        """float32 0, 1, ..., n-1 along ``dim`` (a Dimension)."""
        return self.op("range", shape=[dim], name=name)

    def random_uniform(self, shape, step=None, seed=0, minval=0.0, maxval=1.0, name=None):
        """Uniform draws, keyed on ``seed`` and (optionally) a scalar ``step`` tensor."""
        inputs = [step] if step is not None else []
        return self.op("random_uniform", *inputs, shape=shape, seed=int(seed),
                       minval=float(minval), maxval=float(maxval), name=name)

    def random_normal(self, shape, step=None, seed=0, mean=0.0, stddev=1.0, name=None):
        """Normal draws, keyed on ``seed`` and (optionally) a scalar ``step`` tensor."""
        inputs = [step] if step is not None else []
        return self.op("random_normal", *inputs, shape=shape, seed=int(seed), mean=float(mean),
                       stddev=float(stddev), name=name)

    # ---- math ------------------------------------------------------------------------------------

    def einsum(self, inputs, output_shape, name=None, broadcast=False):
        """The product of ``inputs``, summed over every dim not in ``output_shape``. An output dim
        in no input is refused at this line (a misspelt dim, usually) unless ``broadcast=True``,
        which makes it a broadcast."""
        output_shape = as_shape(output_shape)
        if not broadcast:
            known = {d.name for t in inputs if isinstance(t, Tensor) for d in t.shape.dims}
            for d in output_shape.dims:
                if d.name not in known:
                    label = f"einsum '{self._scope}{name}'" if name else "einsum"
                    raise InvalidArgumentError(
                        f"{label}: output dim '{d.name}' is in no input "
                        f"({', '.join(t.name for t in inputs if isinstance(t, Tensor))}); pass "
                        "broadcast=True to broadcast over it")
        return self.op("einsum", *inputs, shape=output_shape, name=name)

    def add(self, x, y, name=None):
        """``x + y``, broadcast by dim name."""
        return self.op("add", x, y, name=name)

    def sub(self, x, y, name=None):
        """``x - y``, broadcast by dim name."""
        return self.op("sub", x, y, name=name)

    def mul(self, x, y, name=None):
        """``x * y``, broadcast by dim name."""
        return self.op("mul", x, y, name=name)

    def div(self, x, y, name=None):
        """``x / y``, broadcast by dim name."""
        return self.op("div", x, y, name=name)

    def relu(self, x, name=None):
        """``max(x, 0)``."""
        return self.op("relu", x, name=name)

    def exp(self, x, name=None):
        """``e^x``."""
        return self.op("exp", x, name=name)

    def neg(self, x, name=None):
        """``-x``."""
        return self.op("neg", x, name=name)

    def scale(self, x, scalar, name=None):
        """``x * scalar`` (a Python float)."""
        return self.op("scale", x, scalar=float(scalar), name=name)

    def scalar_op(self, type_, x, scalar, name=None):
        """The ``scalar`` form of an elementwise op: ``scalar_op("mul", x, -1e9)``."""
        return self.op(type_, x, scalar=float(scalar), name=name)

    def reduce_sum(self, x, dims=None, name=None):
        """Sum over ``dims`` (names or Dimensions; every dim when None)."""
        return self.op("reduce_sum", x, dims=dims, name=name)

    def reduce_max(self, x, dims=None, name=None):
        """Maximum over ``dims`` (every dim when None)."""
        return self.op("reduce_max", x, dims=dims, name=name)

    def reduce_mean(self, x, dims=None, name=None):
        """Mean over ``dims`` (every dim when None)."""
        return self.op("reduce_mean", x, dims=dims, name=name)

    def normalize(self, type_, inputs, dims, epsilon=0.0, name=None):
        """An op normalising over ``dims``: softmax, layer_norm, rms_norm, softmax_cross_entropy,
        ... with attribute ``epsilon`` when > 0 (as the C++ models write them)."""
        eps = float(epsilon) if epsilon and epsilon > 0 else None
        return self.op(type_, *inputs, dims=dims, epsilon=eps, name=name)

    def softmax(self, x, dims, name=None):
        """Softmax over ``dims`` (names)."""
        return self.normalize("softmax", [x], dims, name=name)

    def cast(self, x, dtype, name=None):
        """``x`` converted to ``dtype`` ("float32" or "int32")."""
        return self.op("cast", x, name=name, attrs={"dtype": _tensors.dtype_name(dtype)})

    def one_hot(self, ids, depth, name=None):
        """float32 one-hot of int32 ``ids`` along the new Dimension ``depth``."""
        return self.op("one_hot", ids, shape=[depth], name=name)

    # ---- shape -----------------------------------------------------------------------------------

    def reshape(self, x, shape, name=None):
        """``x`` with the named ``shape`` of the same element count (row-major)."""
        return self.op("reshape", x, shape=shape, name=name)

    def rename_dim(self, x, old, new, name=None):
        """``x`` with dim ``old`` called ``new`` (same size, same data)."""
        return self.op("rename_dim", x, old=old, new=new, name=name)


def _fetch_names(fetches, default):
    if fetches is None:
        return list(default)
    if isinstance(fetches, (str, Tensor)):
        fetches = [fetches]
    return [f.name if isinstance(f, Tensor) else str(f) for f in fetches]


def _from_protos(serialized):
    from meshrt._proto import tensor_pb2
    return {name: _tensors.from_proto(tensor_pb2.TensorValue.FromString(b))[0]
            for name, b in serialized.items()}
