"""One public app for the file and job probes of this folder (the quota probe starts its own)."""

from __future__ import annotations

import pytest

from tests.security.public_app import start_public_app, stop_app


@pytest.fixture(scope="module")
def public_app(tmp_path_factory):
    app = start_public_app(tmp_path_factory.mktemp("public-app"))
    yield app
    stop_app(app)
