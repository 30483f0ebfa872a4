"""Named dimensions, shapes, meshes and layout rules (Mesh-TensorFlow's vocabulary).

A :class:`Dimension` is a name and a size; a :class:`Shape` an ordered list of dimensions with
distinct names (row-major: the last varies fastest). A :class:`Mesh` is a shape of processors. Layout
rules map tensor dimension names onto mesh dimension names: ``"batch:rows,d_ff:cols"``, a dict
``{"batch": "rows"}`` or a list of pairs; every tensor dim with that name is split over that mesh dim.
"""

import collections
import re

from meshrt.errors import InvalidArgumentError


class Dimension(collections.namedtuple("Dimension", ["name", "size"])):
    """A named tensor (or mesh) dimension: ``Dimension("batch", 32)``."""

    __slots__ = ()

    def __new__(cls, name, size):
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"a dimension needs a non-empty name, not {name!r}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise InvalidArgumentError(
                f"dimension '{name}': size must be an int >= 0, not {size!r}")
        return super().__new__(cls, name, size)

    def __repr__(self):
        return f"Dimension({self.name!r}, {self.size})"


def _as_dimension(d):
    if isinstance(d, Dimension):
        return d
    if isinstance(d, str):
        name, sep, size = d.partition(":")
        if not sep:
            raise InvalidArgumentError(f"dimension '{d}' needs the form name:size")
        try:
            return Dimension(name.strip(), int(size))
        except ValueError:
            raise InvalidArgumentError(f"dimension '{d}': size '{size}' is not an integer") from None
    if isinstance(d, (tuple, list)) and len(d) == 2:
        return Dimension(d[0], d[1])
    raise InvalidArgumentError(f"cannot make a dimension of {d!r} (use Dimension(name, size))")


class Shape:
    """An ordered list of named dimensions.

    Built from a list of :class:`Dimension` (or ``(name, size)`` pairs), a string
    ``"batch:8,d_model:16"``, a dict ``{"batch": 8}`` or another Shape. ``shape["batch"]`` is the
    Dimension called batch, ``shape.size`` the number of elements, ``a + b`` the dims of a then b,
    ``shape - ["d"]`` the shape without d.
    """

    __slots__ = ("_dims",)

    def __init__(self, dims=()):
        if isinstance(dims, Shape):
            dims = dims.dims
        elif isinstance(dims, str):
            # "," or Mesh-TensorFlow's ";" between dims ("rows:2;cols:2"), as the CLI takes.
            dims = [d for d in re.split(r"[,;]", dims) if d.strip()]
        elif isinstance(dims, dict):
            dims = list(dims.items())
        elif isinstance(dims, Dimension):
            dims = [dims]
        out = [_as_dimension(d) for d in dims]
        names = [d.name for d in out]
        for n in names:
            if names.count(n) > 1:
                raise InvalidArgumentError(f"shape {_text(out)} repeats dimension '{n}'")
        self._dims = tuple(out)

    @property
    def dims(self):
        """The dimensions, in order (a tuple of Dimension)."""
        return self._dims

    @property
    def names(self):
        """The dimension names, in order."""
        return [d.name for d in self._dims]

    @property
    def sizes(self):
        """The dimension sizes, in order (what numpy calls the shape)."""
        return tuple(d.size for d in self._dims)

    @property
    def size(self):
        """The number of elements."""
        n = 1
        for d in self._dims:
            n *= d.size
        return n

    @property
    def rank(self):
        """The number of dimensions."""
        return len(self._dims)

    def __len__(self):
        return len(self._dims)

    def __iter__(self):
        return iter(self._dims)

    def __contains__(self, name):
        if isinstance(name, Dimension):
            return name in self._dims
        return name in self.names

    def __getitem__(self, key):
        if isinstance(key, str):
            for d in self._dims:
                if d.name == key:
                    return d
            raise KeyError(f"shape {self} has no dimension '{key}'")
        return self._dims[key]

    def __add__(self, other):
        return Shape(list(self._dims) + list(Shape(other).dims))

    def __sub__(self, names):
        if isinstance(names, (str, Dimension)):
            names = [names]
        drop = {n.name if isinstance(n, Dimension) else n for n in names}
        return Shape([d for d in self._dims if d.name not in drop])

    def rename(self, old, new):
        """The same shape with dimension ``old`` called ``new``."""
        if old not in self:
            raise InvalidArgumentError(f"shape {self} has no dimension '{old}' to rename")
        return Shape([Dimension(new, d.size) if d.name == old else d for d in self._dims])

    def __eq__(self, other):
        try:
            return self._dims == Shape(other).dims
        except InvalidArgumentError:
            return False

    def __hash__(self):
        return hash(self._dims)

    def __repr__(self):
        return f"Shape('{self}')"

    def __str__(self):
        return _text(self._dims)

    def to_proto(self):
        """The meshrt.v1.Shape message."""
        from meshrt._proto import tensor_pb2
        return tensor_pb2.Shape(dims=[tensor_pb2.Dim(name=d.name, size=d.size) for d in self._dims])

    @staticmethod
    def from_proto(proto):
        """The Shape of a meshrt.v1.Shape message."""
        return Shape([Dimension(d.name, d.size) for d in proto.dims])


def _text(dims):
    return ",".join(f"{d.name}:{d.size}" for d in dims)


def as_shape(value):
    """``value`` as a Shape (a Shape, a list of dims or pairs, a dict or "name:size,..." text)."""
    return value if isinstance(value, Shape) else Shape(value)


class Mesh(Shape):
    """The processor mesh: ``Mesh("rows:2,cols:2")`` (processors numbered row-major)."""

    __slots__ = ()

    @property
    def num_processors(self):
        """The number of processors (the product of the mesh dims)."""
        return self.size

    def __repr__(self):
        return f"Mesh('{self}')"

    def to_proto(self):
        """The meshrt.v1.Mesh message."""
        from meshrt._proto import mesh_pb2
        return mesh_pb2.Mesh(dims=super().to_proto().dims)


def as_mesh(value):
    """``value`` as a Mesh (a Mesh, Shape, "rows:2,cols:2", ...). An empty one is one processor."""
    if isinstance(value, Mesh):
        return value
    if value is None or value == "":
        return Mesh([])
    return Mesh(value)


def layout_rules(rules):
    """Layout rules as a list of ``(tensor_dim, mesh_dim)`` pairs.

    ``rules``: ``"batch:rows,d_ff:cols"`` (or Mesh-TensorFlow's ``"batch:rows;d_ff:cols"``),
    ``{"batch": "rows"}``, a list of pairs, or None/"" (no rule: every tensor replicated).
    """
    if rules is None:
        return []
    if isinstance(rules, str):
        pairs = []
        for item in re.split(r"[,;]", rules):
            item = item.strip()
            if not item:
                continue
            tensor_dim, sep, mesh_dim = item.partition(":")
            if not sep or not tensor_dim.strip() or not mesh_dim.strip():
                raise InvalidArgumentError(
                    f"layout rule '{item}' needs the form tensor_dim:mesh_dim")
            pairs.append((tensor_dim.strip(), mesh_dim.strip()))
        return pairs
    if isinstance(rules, dict):
        return [(str(k), str(v)) for k, v in rules.items()]
    return [(str(k), str(v)) for k, v in rules]


def layout_text(rules):
    """Layout rules as text, "batch:rows,d_ff:cols"."""
    return ",".join(f"{t}:{m}" for t, m in layout_rules(rules))


def layout_proto(rules):
    """Layout rules as the meshrt.v1.LayoutRules message."""
    from meshrt._proto import mesh_pb2
    return mesh_pb2.LayoutRules(rules=[mesh_pb2.LayoutRule(tensor_dim=t, mesh_dim=m)
                                       for t, m in layout_rules(rules)])
