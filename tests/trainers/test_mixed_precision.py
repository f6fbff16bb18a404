"""TrainerConfig.train_precision / act_precision in whole runs: which phase computes in bf16,
and what stays fp32 (weights, gradients, optimizer state, everything a loss is made of)."""
import pytest
import torch

from alf import nest as alf_nest
from alf.errors import ConfigError
from alf.networks.network import Network
from alf.trainers.learner import Learner
from alf.trainers.trainer_config import TrainerConfig
from alf.utils import precision

from tests.unrollers.test_async_unroller import ASYNC_DQN


@pytest.fixture
def network_calls(monkeypatch):
    """Every network call (outermost or nested): (phase, dtype active on that thread), the
    phase being "collect" inside Learner.collect and "train" elsewhere."""
    calls, phase = [], ["train"]
    real_call, real_collect = Network.__call__, Learner.collect

    def call(self, *args, **kwargs):
        calls.append((phase[0], precision.active_dtype()))
        return real_call(self, *args, **kwargs)

    def collect(self, *args, **kwargs):
        phase[0] = "collect"
        try:
            return real_collect(self, *args, **kwargs)
        finally:
            phase[0] = "train"
    monkeypatch.setattr(Network, "__call__", call)
    monkeypatch.setattr(Learner, "collect", collect)
    return calls


def _dtypes(calls, phase):
    return {dtype for p, dtype in calls if p == phase}


def _float_leaves(nest):
    return [x for x in alf_nest.flatten(nest)
            if isinstance(x, torch.Tensor) and x.is_floating_point()]


def _check_losses_in_fp32(algorithm, seen):
    """Wrap ``algorithm.calc_loss``: every float tensor it receives and returns is fp32."""
    real = algorithm.calc_loss

    def calc_loss(info):
        loss_info = real(info)
        seen.extend(x.dtype for x in _float_leaves(info) + _float_leaves(loss_info))
        return loss_info
    algorithm.calc_loss = calc_loss


def _check_fp32_state(algorithm):
    assert all(p.dtype == torch.float32 for p in algorithm.parameters())
    for opt in algorithm.optimizers():
        for state in opt.state.values():
            for v in state.values():
                if isinstance(v, torch.Tensor) and v.is_floating_point() and v.ndim > 0:
                    assert v.dtype == torch.float32


def test_ppo_trains_in_bf16_and_acts_in_fp32(make_trainer, alf_cli, tmp_path, network_calls):
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_PPO,
                           ['TrainerConfig.train_precision="bf16"'])
    before = {k: v.clone() for k, v in trainer.algorithm.state_dict().items()
              if isinstance(v, torch.Tensor)}
    seen = []
    _check_losses_in_fp32(trainer.algorithm, seen)
    network_calls.clear()  # construction's dry runs (output specs) are not a phase
    trainer.run()
    assert trainer.context.train_dtype is torch.bfloat16 and trainer.context.act_dtype is None
    assert _dtypes(network_calls, "collect") == {None}
    assert _dtypes(network_calls, "train") == {torch.bfloat16}
    # returns, advantages, log-probs, ratios, values and every loss term: fp32
    assert seen and set(seen) == {torch.float32}
    _check_fp32_state(trainer.algorithm)
    after = trainer.algorithm.state_dict()
    assert any(not torch.equal(v, after[k]) for k, v in before.items()
               if v.is_floating_point())


def test_acting_alone_in_bf16(make_trainer, alf_cli, tmp_path, network_calls):
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_PPO,
                           ['TrainerConfig.act_precision="bf16"'])
    network_calls.clear()  # construction's dry runs (output specs) are not a phase
    trainer.run()
    assert _dtypes(network_calls, "collect") == {torch.bfloat16}
    assert _dtypes(network_calls, "train") == {None}
    assert trainer.context.iteration == 4


def test_fp32_is_the_default_and_never_autocasts(make_trainer, alf_cli, tmp_path,
                                                 network_calls):
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_PPO)
    network_calls.clear()  # construction's dry runs (output specs) are not a phase
    trainer.run()
    assert trainer.context.train_dtype is None and trainer.context.act_dtype is None
    assert network_calls and {d for _, d in network_calls} == {None}


def test_sac_trains_in_bf16_with_fp32_targets_and_alpha(make_trainer, alf_cli, tmp_path,
                                                        network_calls):
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_SAC,
                           ['TrainerConfig.train_precision="bf16"',
                            "TrainerConfig.save_replay_buffer=False"])
    seen = []
    _check_losses_in_fp32(trainer.algorithm, seen)
    network_calls.clear()  # construction's dry runs (output specs) are not a phase
    trainer.run()
    assert _dtypes(network_calls, "train") == {torch.bfloat16}
    assert seen and set(seen) == {torch.float32}
    _check_fp32_state(trainer.algorithm)
    assert all(b.dtype == torch.float32 for b in trainer.algorithm.buffers()
               if b.is_floating_point())


def test_an_async_actor_acts_in_bf16(make_trainer, tmp_path, network_calls):
    """Serial async mode: the actor (built by build_algorithm for the "actor" role) gets
    the acting dtype; the learner trains in fp32."""
    trainer = make_trainer(tmp_path / "run", ASYNC_DQN,
                           ['TrainerConfig.async_mode="serial"',
                            'TrainerConfig.act_precision="bf16"'])
    network_calls.clear()  # construction's dry runs (output specs) are not a phase
    trainer.run()
    assert _dtypes(network_calls, "collect") == {torch.bfloat16}
    assert _dtypes(network_calls, "train") == {None}
    assert trainer.context.iteration == 6


def test_an_unknown_precision_is_refused_naming_the_field(clean_gin):
    from alf.algorithms.ppo_algorithm import PPOAlgorithm
    with pytest.raises(ConfigError, match=r"TrainerConfig.train_precision='fp16': expected one "
                                          r"of \('fp32', 'bf16', 'auto'\)"):
        TrainerConfig(algorithm_ctor=PPOAlgorithm, num_iterations=1, train_precision="fp16")


@pytest.mark.parametrize("field, collect_dtype", [("train_precision", torch.bfloat16),
                                                  ("act_precision", None)])
def test_an_on_policy_rollout_is_its_training_forward(make_trainer, alf_cli, tmp_path,
                                                      network_calls, field, collect_dtype):
    """A2C trains through its rollout's graph: the rollout runs in the training dtype."""
    trainer = make_trainer(tmp_path / "run", alf_cli.TINY_A2C, [f'TrainerConfig.{field}="bf16"'])
    network_calls.clear()
    trainer.run()
    assert trainer.algorithm.on_policy
    assert _dtypes(network_calls, "collect") == {collect_dtype}
    _check_fp32_state(trainer.algorithm)


def test_an_actor_keeps_its_bf16_weight_casts_without_changing_a_bit(make_trainer, tmp_path,
                                                                     monkeypatch):
    """An async actor acting in bf16 casts its weights once per version
    (precision.keep_weight_casts, dropped when new weights load), not at every step: the
    run is bit for bit the one that casts at every step, so no step acted with the
    previous version's copies."""
    import contextlib
    conf = ['TrainerConfig.async_mode="serial"', 'TrainerConfig.act_precision="bf16"']
    drops = []
    real_drop = precision.drop_weight_casts
    monkeypatch.setattr(precision, "drop_weight_casts",
                        lambda: (drops.append(1), real_drop())[1])
    kept = make_trainer(tmp_path / "kept", ASYNC_DQN, conf)
    kept.run()
    assert len(drops) >= 6  # one per weights version loaded (6 iterations)
    monkeypatch.setattr(precision, "keep_weight_casts", lambda dtype: contextlib.nullcontext())
    recast = make_trainer(tmp_path / "recast", ASYNC_DQN, conf)
    recast.run()
    a, b = kept.algorithm.state_dict(), recast.algorithm.state_dict()
    changed = [k for k in a if isinstance(a[k], torch.Tensor) and not torch.equal(a[k], b[k])]
    assert not changed, f"parameters differ: {changed[:3]}"


def test_a_sync_unroll_keeps_its_bf16_weight_casts_without_changing_a_bit(
        make_trainer, tmp_path, monkeypatch):
    """A sync unroll's weights are fixed, so bf16 acting casts them once per unroll: the
    run is bit for bit the one that casts at every step (the casts made in one unroll
    must not reach the next, after training changed the weights)."""
    import contextlib
    conf = ['TrainerConfig.act_precision="bf16"', "TrainerConfig.num_iterations=4"]
    regions = []
    real_keep = precision.keep_weight_casts
    monkeypatch.setattr(precision, "keep_weight_casts",
                        lambda dtype: (regions.append(dtype), real_keep(dtype))[1])
    kept = make_trainer(tmp_path / "kept", params=conf)
    kept.run()
    assert torch.bfloat16 in regions  # the unrolls ran in a region that keeps the casts
    monkeypatch.setattr(precision, "keep_weight_casts", lambda dtype: contextlib.nullcontext())
    recast = make_trainer(tmp_path / "recast", params=conf)
    recast.run()
    a, b = kept.algorithm.state_dict(), recast.algorithm.state_dict()
    changed = [k for k in a if isinstance(a[k], torch.Tensor) and not torch.equal(a[k], b[k])]
    assert not changed, f"parameters differ: {changed[:3]}"


def test_bf16_with_several_cpu_threads_warns_how_to_run_side_by_side(make_trainer, tmp_path,
                                                                     capsys):
    """oneDNN's bf16 kernels spin while waiting for sibling threads: a bf16 CPU run with
    more than one torch thread says so at the start, naming the fix."""
    from alf.trainers.run_report import bf16_cpu_threads
    make_trainer(tmp_path / "two", params=['TrainerConfig.train_precision="bf16"',
                                           "TrainerConfig.num_threads=2"])
    err = capsys.readouterr().err
    assert ("bf16 on the CPU with 2 torch threads" in err
            and "TrainerConfig.num_threads=1 for runs side by side" in err)
    make_trainer(tmp_path / "one", params=['TrainerConfig.train_precision="bf16"',
                                           "TrainerConfig.num_threads=1"])
    assert "oneDNN" not in capsys.readouterr().err
    make_trainer(tmp_path / "fp32", params=["TrainerConfig.num_threads=2"])
    assert "oneDNN" not in capsys.readouterr().err
    config = TrainerConfig(algorithm_ctor=object, num_iterations=1, device="cpu",
                           act_precision="bf16", async_unroll=True)
    assert bf16_cpu_threads(config, 4) == 0  # acting in env workers: 1 thread each


def test_with_the_learner_thread_every_act_step_drops_the_kept_casts(make_trainer, alf_cli,
                                                                      tmp_path, monkeypatch):
    """The learner thread steps the optimizer between act steps of a sync unroll, so the
    kept bf16 casts are dropped before every act step (under the weights lock)."""
    drops = []
    real_drop = precision.drop_weight_casts
    monkeypatch.setattr(precision, "drop_weight_casts",
                        lambda: (drops.append(1), real_drop())[1])
    trainer = make_trainer(tmp_path / "thread", alf_cli.TINY_PPO,
                           ["TrainerConfig.learner_thread=True", "TrainerConfig.num_iterations=3",
                            'TrainerConfig.act_precision="bf16"'])
    trainer.run()
    assert len(drops) >= trainer.context.env_steps // 2  # one per act step (2 envs each)


def test_a_serial_async_bf16_actor_warns_about_its_threads():
    from alf.trainers.run_report import bf16_cpu_threads
    kw = dict(algorithm_ctor=object, num_iterations=1, device="cpu", act_precision="bf16",
              async_unroll=True)
    assert bf16_cpu_threads(TrainerConfig(async_mode="serial", **kw), 2) == 2
    assert bf16_cpu_threads(TrainerConfig(**kw), 2) == 0
