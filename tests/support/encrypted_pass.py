"""The encrypted pass of the suite (``CTXSTORE_TEST_ENCRYPTION=1``, a step of .ci/run): every
store the tests make, in the test session and in every process it starts, is a store with
``encryption=``.

The session makes one LocalKeyProvider directory and names it in ``CTXSTORE_TEST_KEYS`` and
``CTXSTORE_KEYS`` (the CLI and the worker read the latter), which the processes it starts
inherit; importing the ``tests`` package (what a spawned test process does first) makes that
provider the default of ``Settings.encryption`` in the process. A test that passes
``encryption=None`` still gets a store without.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

ENCRYPTION_ENV = "CTXSTORE_TEST_ENCRYPTION"
KEYS_ENV = "CTXSTORE_TEST_KEYS"
ENCRYPTED = os.environ.get(ENCRYPTION_ENV, "").strip() not in ("", "0")
_PROVIDER: list[Any] = []


def provider() -> Any:
    """The pass's key provider (made, and made the default, on first use); None outside it."""
    if not ENCRYPTED:
        return None
    if not _PROVIDER:
        import ctxstore
        from ctxstore.crypto import LocalKeyProvider

        folder = os.environ.get(KEYS_ENV)
        if not folder:
            folder = os.path.join(tempfile.mkdtemp(prefix="ctxstore-keys-"), "keys")
            os.environ[KEYS_ENV] = folder
        os.environ["CTXSTORE_KEYS"] = folder
        _PROVIDER.append(LocalKeyProvider(folder))
        ctxstore.Settings.__init__.__kwdefaults__["encryption"] = _PROVIDER[0]
    return _PROVIDER[0]
