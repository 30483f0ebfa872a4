"""Every public function, class and method of the package has a docstring."""

import inspect

import meshrt as mr
from meshrt import (cluster, errors, graph, initializers, layers, models, shapes, tensors, training,
                    translation)

MODULES = [mr, cluster, errors, graph, initializers, layers, models, shapes, tensors, training,
           translation]


def public_members(module):
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj) or inspect.isclass(obj):
            yield f"{module.__name__}.{name}", obj
            if inspect.isclass(obj):
                for mname, m in vars(obj).items():
                    if mname.startswith("_") or not (inspect.isfunction(m) or
                                                     isinstance(m, (property, staticmethod))):
                        continue
                    yield f"{module.__name__}.{name}.{mname}", m


def test_every_public_function_has_a_docstring():
    missing = []
    count = 0
    for module in MODULES:
        assert module.__doc__, module.__name__
        for name, obj in public_members(module):
            count += 1
            target = obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)
            if not (inspect.getdoc(target) or "").strip():
                missing.append(name)
    assert count > 100
    assert not missing, f"no docstring: {missing}"
