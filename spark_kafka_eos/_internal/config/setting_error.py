"""The error a connection setting raises when the sink's transaction session cannot honour it: one type, whatever
the setting (TLS, Kerberos, SASL...), so that the options parser turns every one into an option error alike."""

from __future__ import annotations

UNSUPPORTED_FIX = "remove it or use a supported equivalent (the sink commits and aborts transactions with kafka-python)."


class UnsupportedSettingError(ValueError):
    """A setting the transaction session cannot honour; ``setting`` is its librdkafka name (never its value),
    ``fix`` what to do."""

    def __init__(self, setting: str, message: str, fix: str = UNSUPPORTED_FIX) -> None:
        super().__init__(message)
        self.setting = setting
        self.fix = fix
