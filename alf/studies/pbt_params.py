"""Which gin parameters population-based training may change in the middle of a run.

A PBT member trains in segments: each is ``alf.bin.train`` resuming the member's run
from its checkpoint with the member's current hyper-parameters as ``--conf_param``.
A new value takes effect only if nothing in the checkpoint overrides it and it does not
change the shape of what the checkpoint holds. So the mutable parameters are listed
here, each checked: values the algorithm reads again at every update (learning rates,
applied from their schedule at each step; loss coefficients; discounts; clip ranges;
target-update rates) qualify; these do not, and are refused with one line:

- network sizes, env counts, replay buffer length (they shape the saved state);
- state the checkpoint restores: an optimizer's ``betas``/``eps`` (its param groups),
  SAC's ``initial_alpha`` (the learned log-alpha), normaliser settings.

A researcher's own parameter qualifies on the same terms and is declared where it is
defined: ``@alf.configurable(mutable=("v_max",))`` (checked: a name that is not a
parameter is an error when the module is imported). A resumed segment parses the run's
config with the new value and builds every object again before loading the checkpoint,
so a value read at construction and kept as a plain attribute (not a parameter or a
registered buffer, which the checkpoint restores) takes effect from that segment on. A
subclass parameter forwarded through ``**kwargs`` to a parent that lists it
(``ClippedDqn.gamma`` -> ``DqnAlgorithm.gamma``) is mutable as the parent's is.
"""
import inspect
from typing import Dict, FrozenSet

import gin

from alf.config import binding_key, declared_mutable
from alf.config_subclass import forwarded_params
from alf.errors import ConfigError

#: configurable -> parameters PBT may change between two segments of a run
MUTABLE: Dict[str, FrozenSet[str]] = {
    # optimizers: lr is set from its schedule before every step; clipping read every step
    "alf.optimizers.Adam": frozenset({"lr", "gradient_clipping"}),
    "alf.optimizers.AdamW": frozenset({"lr", "gradient_clipping"}),
    "alf.optimizers.RMSprop": frozenset({"lr", "gradient_clipping"}),
    "alf.optimizers.SGD": frozenset({"lr", "gradient_clipping"}),
    # schedules of training progress (e.g. a learning rate or a clip range)
    "LinearSchedule": frozenset({"start", "end"}),
    # losses and algorithms: coefficients read when the loss is computed
    "PPOLoss": frozenset({"importance_ratio_clipping", "entropy_regularization",
                          "td_loss_weight", "value_clipping"}),
    "ActorCriticLoss": frozenset({"gamma", "td_lambda", "entropy_regularization",
                                  "td_loss_weight"}),
    "PPOAlgorithm": frozenset({"gamma", "gae_lambda"}),
    "ImpalaAlgorithm": frozenset({"gamma", "vtrace_lambda", "clip_rho_threshold",
                                  "clip_c_threshold", "clip_pg_rho_threshold"}),
    "DqnAlgorithm": frozenset({"gamma", "target_update_tau", "target_update_period"}),
    "SacAlgorithm": frozenset({"gamma", "target_update_tau", "target_update_period"}),
    "DdpgAlgorithm": frozenset({"gamma", "target_update_tau", "exploration_noise",
                                "target_policy_noise", "target_noise_clip"}),
    "Td3Algorithm": frozenset({"gamma", "target_update_tau", "exploration_noise",
                               "target_policy_noise", "target_noise_clip"}),
    "IqlAlgorithm": frozenset({"gamma", "expectile", "temperature", "target_update_tau"}),
    # the Learner reads these every iteration
    "TrainerConfig": frozenset({"mini_batch_size", "num_updates_per_train_iter"}),
    # the config's weights replace the checkpoint's copy on restore
    # (docs/design/config_on_resume.md); one of them: Agent.reward_weights[i]
    "Agent": frozenset({"reward_weights"}),
}
_SHORT = {name.rsplit(".", 1)[-1]: name for name in MUTABLE}  # Adam -> alf.optimizers.Adam


def configurable_of(binding: str) -> "tuple[str, str]":
    """``lr/LinearSchedule.start`` -> ``("LinearSchedule", "start")`` (scope dropped,
    a short optimizer name completed to its registered one; an element ``[i]`` dropped)."""
    configurable, param = binding_key(binding)
    return _SHORT.get(configurable, configurable), param


def check_mutable(binding: str) -> None:
    """Refuse a parameter PBT cannot change mid-run.

    Raises:
        ConfigError: one line naming the parameter, why, and what may change instead.
    """
    configurable, param = configurable_of(binding)
    if param in mutable_params(configurable):
        return
    allowed = ", ".join(f"{c.rsplit('.', 1)[-1]}.{{{','.join(sorted(p))}}}"
                        for c, p in MUTABLE.items() if c in (configurable,)) or \
        "learning rates (Adam.lr, LinearSchedule.start/end), loss coefficients, discounts, " \
        "clip ranges, target-update rates"
    raise ConfigError(f"--param {binding}: PBT cannot change it in the middle of a run (it is "
                      "read once when the run is built or restored from its checkpoint); "
                      f"mutable here: {allowed} (full list: alf/studies/pbt_params.py; a "
                      "parameter of your own: @alf.configurable(mutable=(...)), "
                      "docs/experiments.md)")


def mutable_params(configurable: str) -> FrozenSet[str]:
    """The parameters of ``configurable`` (as :func:`configurable_of` returns it) PBT may
    change: listed in :data:`MUTABLE`, declared with ``alf.configurable(mutable=...)`` by
    an imported module, or forwarded through ``**kwargs`` to a parent that has them."""
    short = configurable.rsplit(".", 1)[-1]
    declared = declared_mutable()
    found = set(MUTABLE.get(configurable, ())) | set(declared.get(short, ()))
    try:
        registered = gin.config._REGISTRY.get_match(configurable)  # pylint: disable=protected-access
    except Exception:  # noqa: BLE001 - an unknown name has nothing mutable
        registered = None
    cls = registered.wrapped if registered is not None else None
    for name, owner in ((forwarded_params(cls) or {}).items() if inspect.isclass(cls) else ()):
        if owner is not cls:
            owner_name = _SHORT.get(owner.__name__, owner.__name__)
            if name in MUTABLE.get(owner_name, ()) or name in declared.get(owner.__name__, ()):
                found.add(name)
    return frozenset(found)
