"""Who may depend on core's packages (core/README.md "Layering").

Each core package is visible to the core packages above it and to every layer above core; core/testing
(testonly) only to tests. Bazel visibility cannot tell a test from a library of the same package: the
queries in core/README.md check that no library of a lower layer depends on a higher one.
"""

# The layers above core (they may use all of it).
ABOVE_CORE = [
    "//:__pkg__",
    "//bench:__subpackages__",
    "//client:__subpackages__",
    "//coordinator:__subpackages__",
    "//examples:__subpackages__",
    "//fuzz:__subpackages__",
    "//kernels:__subpackages__",
    "//models:__subpackages__",
    "//monitoring:__subpackages__",
    "//python:__subpackages__",
    "//rpc:__subpackages__",
    "//runtime:__subpackages__",
    "//tests:__subpackages__",
    "//worker:__subpackages__",
]

def visible_above(*core_packages):
    """The visibility list of a core package: the named core packages above it, then ABOVE_CORE."""
    return ["//core/%s:__pkg__" % p for p in core_packages] + ["//core:__pkg__"] + ABOVE_CORE
