"""How log records look on the console of alf's commands.

alf's modules log through ``absl.logging`` (a buffer's size, an unreadable
checkpoint, an unseeded env). absl's own format
(``I1125 15:47:59.864881 140459177282432 replay_buffer.py:104] ...``) is for
debugging servers; a command's user reads every other line as ``[alf] ...``, so
records are shown the same way: ``[alf] <message>`` for information,
``[alf] warning: <message>`` and ``[alf] error: <message>`` above it.
"""
import logging


class AlfLogFormatter(logging.Formatter):
    """Formats a log record as one ``[alf] ...`` line (plus a traceback if it has one)."""

    def format(self, record: logging.LogRecord) -> str:
        if record.levelno >= logging.ERROR:
            prefix = "[alf] error: "
        elif record.levelno >= logging.WARNING:
            prefix = "[alf] warning: "
        else:
            prefix = "[alf] "
        text = prefix + record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text
