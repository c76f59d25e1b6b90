"""The test suite (see tests/conftest.py)."""

from tests.support.encrypted_pass import provider

provider()
