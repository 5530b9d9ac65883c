"""Let the vendored tests import ``kubernetes.e2e_test`` as they do in their own repository.

Upstream runs them from a checkout where ``kubernetes/`` is the package itself; here the
``kubernetes`` package is the installed one, so this directory's ``kubernetes/`` is added to
its ``__path__`` and ``kubernetes.e2e_test`` resolves to the vendored copy. The tests stay
unchanged. Run pytest from this directory: ``test_utils.py`` opens its YAML files by paths
relative to it (``kubernetes/e2e_test/test_yaml/...``).
"""

from pathlib import Path

import kubernetes

kubernetes.__path__.append(str(Path(__file__).resolve().parent / "kubernetes"))
