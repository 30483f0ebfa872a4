"""How variables start (core/ops/ops_state.h). Random initializers are keyed on (seed, the variable's
name, the element's global index): a variable starts bitwise equal on every mesh and layout and in
the reference interpreter."""


class Initializer:
    """One initializer: ``kind`` and its parameters (use the functions below)."""

    def __init__(self, kind, seed=0, fan_in=None, **params):
        self.kind = kind
        self.seed = int(seed)
        self.fan_in = list(fan_in or [])
        self.params = {k: float(v) for k, v in params.items()}

    def fill(self, op):
        """Writes this initializer into a variable op (as the C++ GraphBuilder::Variable does)."""
        op.attrs["initializer"].s = self.kind
        for key in ("value", "minval", "maxval", "mean", "stddev"):
            if key in self.params:
                op.attrs[key].f = self.params[key]
        if self.seed != 0:
            op.attrs["seed"].i = self.seed
        op.dims.extend(d.name if hasattr(d, "name") else d for d in self.fan_in)

    def __repr__(self):
        return f"Initializer({self.kind!r}, seed={self.seed}, {self.params})"


def zeros():
    """Every element 0 (the default)."""
    return Initializer("zeros")


def ones():
    """Every element 1."""
    return Initializer("ones")


def constant(value):
    """Every element ``value``."""
    return Initializer("constant", value=value)


def uniform(minval=0.0, maxval=1.0, seed=0):
    """Uniform draws in [minval, maxval)."""
    return Initializer("uniform", seed=seed, minval=minval, maxval=maxval)


def normal(stddev=1.0, mean=0.0, seed=0):
    """Normal draws N(mean, stddev^2)."""
    return Initializer("normal", seed=seed, mean=mean, stddev=stddev)


def truncated_normal(stddev=1.0, mean=0.0, seed=0):
    """Normal draws; those beyond 2 stddev are redrawn."""
    return Initializer("truncated_normal", seed=seed, mean=mean, stddev=stddev)


def glorot_uniform(seed=0, fan_in=None):
    """Uniform in +-sqrt(6 / (fan_in + fan_out)); ``fan_in``: dim names (default all but the last)."""
    return Initializer("glorot_uniform", seed=seed, fan_in=fan_in)


def glorot_normal(seed=0, fan_in=None):
    """Normal with stddev sqrt(2 / (fan_in + fan_out))."""
    return Initializer("glorot_normal", seed=seed, fan_in=fan_in)
