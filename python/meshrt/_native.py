"""Loads meshrt._core (the C++ core, python/core_module.cc) once, with a clear error if missing."""

_CORE = None
_OPS = None


def core():
    """The meshrt._core module."""
    global _CORE
    if _CORE is None:
        try:
            from meshrt import _core
        except ImportError as e:
            raise ImportError(
                "meshrt's C++ core (meshrt/_core.so) is missing: run `make build` in the "
                "repository (it builds //python:meshrt/_core.so), then, for a pip-installed "
                f"package, `pip install --no-build-isolation ./python` again ({e})") from e
        _CORE = _core
    return _CORE


def _ops():
    global _OPS
    if _OPS is None:
        _OPS = {o["type"]: o for o in core().ops()}
    return _OPS


def op_types():
    """The set of registered op types."""
    return set(_ops())


def op_summary(type_):
    o = _ops()[type_]
    return f"{o['type']} ({o['family']}): {o['summary']}"
