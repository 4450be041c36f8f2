"""A feature whose optional dependency is missing says, in one line, which extra to install
(``troth.sdk.extras``). The dependency is hidden by a ``None`` entry in ``sys.modules``,
which makes its import fail exactly as an absent package does."""

from __future__ import annotations

import sys

import pytest

from troth.sdk.encryption import AesGcmEncryptor
from troth.sdk.extras import MissingExtra
from troth.sdk.metrics import PrometheusMetrics


def test_metrics_without_prometheus_client_name_the_metrics_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(MissingExtra) as raised:
        PrometheusMetrics(registry=None)  # type: ignore[arg-type]
    message = str(raised.value)
    assert "pip install 'troth[metrics]'" in message and "\n" not in message
    assert isinstance(raised.value, ImportError)  # whoever catches ImportError still does


def test_encryption_without_cryptography_names_the_encryption_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] == "cryptography"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "cryptography", None)
    with pytest.raises(MissingExtra, match=r"pip install 'troth\[encryption\]'"):
        AesGcmEncryptor({"k": b"0" * 32}, "k")
