"""Which ``--conf_param`` changes a resume refuses (docs/design/config_on_resume.md).

A resumed run is built from its config (the saved ``config.gin`` with the resume's
changes) and then loads the checkpoint's state into what was built. A change applies
when what it sets is read again after that load: values kept as plain attributes
(loss coefficients, discounts, ``TrainerConfig`` limits), schedules of progress
(learning rates), and configuration the checkpoint also caches (``Agent.reward_weights``:
alf/algorithms/reward_weights.py). A change to a value the load overwrites cannot apply;
such a change is refused in one line before anything is written (instead of being
reported as applied). These are the values listed here. A change of shape (network
sizes, the env, the number of reward modules) is refused when the checkpoint is
compared with the built networks (alf/trainers/experiment_signature.py).
"""
from typing import Dict, FrozenSet, Sequence

from alf.config import binding_key
from alf.errors import ConfigError
from alf.utils.optimizers import param_group_params

#: configurable (short name) -> parameters whose value the checkpoint restores
RESTORED_STATE: Dict[str, FrozenSet[str]] = {
    # an optimizer's param groups (torch's load_state_dict restores them whole; all but the
    # lr, which is set from its schedule at every step): derived from each factory of
    # alf.optimizers, so a parameter added to one is covered
    **param_group_params(),
    # the initial value of a learned parameter (log alpha is in the checkpoint)
    "SacAlgorithm": frozenset({"initial_alpha"}),
}


def check_resume_overrides(overrides: Sequence[str]) -> None:
    """Refuse a resume's change that the checkpoint would undo.

    Args:
        overrides: the ``--conf_param`` bindings that change the saved config.

    Raises:
        ConfigError: one line naming the binding, why it cannot apply and what to do.
    """
    for binding in overrides:
        configurable, param = binding_key(binding)  # Adam.betas[1]=...: Adam.betas
        short = configurable.rsplit(".", 1)[-1]
        if param in RESTORED_STATE.get(short, ()):
            raise ConfigError(
                f"--conf_param '{binding}': a resume cannot change {short}.{param}: its "
                "value is restored from the checkpoint (with the optimizer's or the "
                "algorithm's state), so the change would not apply; start a new run "
                "with it (a new --root_dir, e.g. --rerun=<this run> --conf_param ...)")
