# agent-runner (sandbox-images/Dockerfile appends this to Debian's sitecustomize.py).
#
# The runner sets PYTHONPYCACHEPREFIX=/tmp/.pycache, so bytecode of the
# workspace and of user installs goes to the container's own /tmp, never into
# the worktree (README "Task images"). Under a prefix Python also stops
# reading the __pycache__ directories Debian precompiled for the image's own
# packages under /usr, and every new container would compile the standard
# library and pytest again (~2.4 s for `import pytest`, bench/bytecode-cache.bench.ts).
# Files under /usr keep their usual __pycache__ location: the image is
# read-only in the sandbox, so nothing the agent runs can put a .pyc there.
# Python has no setting for this; cache_from_source is the one function its
# source loader asks (importlib._bootstrap_external).
import sys as _sys

if _sys.pycache_prefix:
    import _frozen_importlib_external as _external
    import os as _os

    _prefixed_cache_from_source = _external.cache_from_source

    def _image_cache_from_source(path, debug_override=None, *, optimization=None):
        cached = _prefixed_cache_from_source(path, debug_override, optimization=optimization)
        source = _os.path.abspath(_os.fspath(path))
        if not source.startswith("/usr/"):
            return cached
        return _os.path.join(_os.path.dirname(source), "__pycache__", _os.path.basename(cached))

    _external.cache_from_source = _image_cache_from_source
