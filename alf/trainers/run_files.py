"""The run's config files in ``root_dir``: ``config.gin`` (what a resume or
``alf.bin.play`` re-parses) and ``operative_config.gin`` (informational: every
value gin used), both written atomically; and at each start the record of where the
run came from (``run_info/``, :mod:`alf.trainers.run_provenance`)."""
import os
from typing import Callable, Optional

import torch

from alf import config as alf_config
from alf.errors import UserError, WriteFailedError
from alf.trainers.run_provenance import record_start
from alf.utils.atomic_write import atomic_write_text

CONFIG_FILE = "config.gin"


def write_config(root_dir: str, config_text: str) -> None:
    """Write ``root_dir/config.gin`` if it is new or the text changed, e.g. by
    ``--conf_param`` overrides given when resuming, so the next resume keeps them.

    Raises:
        UserError: ``root_dir`` cannot be created.
        WriteFailedError: the file cannot be written (full disk); the old one is intact.
    """
    try:
        os.makedirs(root_dir, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create the run directory {root_dir}: "
                        f"{e.strerror or e}") from None
    if not config_text:
        return
    config_path = os.path.join(root_dir, CONFIG_FILE)
    if os.path.exists(config_path):
        with open(config_path) as f:
            if f.read() == config_text:
                return
    atomic_write_text(config_path, config_text, "the run's config")


def write_start_files(root_dir: str, config_text: str,
                      algorithm: Optional[torch.nn.Module] = None) -> None:
    """At the start of a run (new or resumed, once its checkpoint is known to fit):
    :func:`write_config`, then this start's provenance record in ``root_dir/run_info/``
    (a failure there is one warning line; the run goes on), with the pretrained parts
    of ``algorithm``, the run's built algorithm.

    Raises:
        UserError, WriteFailedError: as :func:`write_config`.
    """
    write_config(root_dir, config_text)
    record_start(root_dir, config_text, algorithm)


def write_operative_config(root_dir: str, notice: Callable[[str], None],
                           report: bool = True) -> None:
    """``operative_config.gin``. A failed write keeps the previous file and is one
    warning line (through ``notice``), or nothing when ``report`` is False (the run is
    already failing, and its first error is the one to show)."""
    try:
        text = alf_config.operative_config_text()
    except Exception:  # noqa: BLE001 - informational file only
        return
    if not text:
        return
    try:
        atomic_write_text(os.path.join(root_dir, "operative_config.gin"), text)
    except WriteFailedError as e:
        if report:
            notice(f"[alf] warning: {e}; the previous operative_config.gin (if any) is kept")
