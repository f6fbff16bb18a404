"""The diagnostic statistics (alf/utils/summary_stats.py): values of known tensors, the
algorithms' wiring (which tensors, which rows), and no work on iterations that write no
summaries."""
import math
from typing import Dict, List, Tuple

import numpy as np
import pytest
import torch

from alf.data_structures import Experience, LossInfo, StepType, TimeStep
from alf.utils import summary_stats
from alf.utils.run_context import RunContext
from alf.utils.summary_stats import ScalarBatch, explained_variance, tensor_stats


class _Writer:
    def __init__(self):
        self.points: Dict[str, List[Tuple[float, int]]] = {}

    def add_scalar(self, tag, value, step):
        self.points.setdefault(tag, []).append((float(value), int(step)))


def _context(due: bool = True) -> RunContext:
    ctx = RunContext(summary_writer=_Writer(), summary_interval=1 if due else 10,
                     summarize_first_interval=False)
    ctx.begin_iteration()
    return ctx


def test_explained_variance_of_a_known_pair():
    target = torch.tensor([1.0, 2.0, 3.0, 4.0])
    pred = torch.tensor([1.0, 2.0, 3.0, 5.0])
    # Var[target - pred] = Var[0, 0, 0, -1] = 0.1875, Var[target] = 1.25
    assert explained_variance(pred, target).item() == pytest.approx(1 - 0.1875 / 1.25)
    assert explained_variance(target, target).item() == 1.0
    assert explained_variance(torch.full((4,), 2.5), target).item() == pytest.approx(0.0)
    # SB3's formula on random data
    rng = np.random.default_rng(0)
    y, p = rng.normal(size=50), rng.normal(size=50)
    assert explained_variance(torch.tensor(p), torch.tensor(y)).item() == pytest.approx(
        1 - np.var(y - p) / np.var(y), rel=1e-5)


def test_explained_variance_masks_and_is_nan_where_undefined():
    target = torch.tensor([[1.0, 2.0], [3.0, 100.0]])
    pred = torch.tensor([[1.0, 2.0], [3.0, -7.0]])
    mask = torch.tensor([[True, True], [True, False]])
    assert explained_variance(pred, target, mask).item() == 1.0  # the bad entry is masked
    assert math.isnan(explained_variance(pred, torch.ones(2, 2)).item())  # no variance
    assert math.isnan(explained_variance(pred, target, torch.zeros(2, 2)).item())  # no entry


def test_tensor_stats_over_the_masked_entries():
    x = torch.tensor([1.0, 3.0, 5.0, 1000.0])
    stats = tensor_stats(x, torch.tensor([1.0, 1.0, 1.0, 0.0])).tolist()
    assert stats == pytest.approx([3.0, math.sqrt(8 / 3), 1.0, 5.0])
    assert all(math.isnan(v) for v in tensor_stats(x, torch.zeros(4)).tolist())
    # a [B] mask over [B, k] columns; bf16 reduced in float32
    cols = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.bfloat16)
    assert tensor_stats(cols, torch.tensor([True, False])).tolist()[0] == 1.5


def test_a_scalar_batch_writes_its_tags_in_one_transfer(monkeypatch):
    ctx = _context()
    batch = ScalarBatch()
    batch.add("Loss/A/x", torch.tensor(2.0))
    batch.add_stats("Value/A/q", torch.tensor([1.0, 3.0]), suffix="_1")
    reads = []
    real = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: reads.append(1) or real(t))
    out = batch.write(ctx, step=7)
    assert len(reads) == 1
    assert out == {"Loss/A/x": 2.0, "Value/A/q_mean_1": 2.0, "Value/A/q_std_1": 1.0,
                   "Value/A/q_min_1": 1.0, "Value/A/q_max_1": 3.0}
    assert ctx.summary_writer.points["Value/A/q_max_1"] == [(3.0, 7)]
    assert "Value/A_vs_EnvironmentSteps/q_max_1" in ctx.summary_writer.points


def _ppo(ctx, columns: int = 0):
    from alf.algorithms.ppo_algorithm import PPOAlgorithm
    from alf.networks import ActorDistributionNetwork, ValueNetwork
    from alf.tensor_specs import BoundedTensorSpec, TensorSpec
    return PPOAlgorithm(TensorSpec((3,)), BoundedTensorSpec((), torch.int64, 0, 1),
                        reward_spec=TensorSpec((columns,)) if columns else TensorSpec(()),
                        actor_network_ctor=lambda input_spec, action_spec:
                        ActorDistributionNetwork(input_spec, action_spec, fc_layer_params=(4,)),
                        value_network_ctor=lambda input_spec, **kw:
                        ValueNetwork(input_spec, fc_layer_params=(4,), **kw), context=ctx)


def _ppo_buffer(value, returns, advantages, step_type) -> Experience:
    from alf.algorithms.ppo_algorithm import PPORolloutInfo
    B, T = step_type.shape
    ts = TimeStep(step_type=step_type, reward=torch.zeros(B, T), discount=torch.ones(B, T),
                  observation=torch.zeros(B, T, 3), prev_action=torch.zeros(B, T),
                  env_id=torch.zeros(B, T), env_info=())
    return Experience(time_step=ts, action=torch.zeros(B, T),
                      rollout_info=PPORolloutInfo(log_prob=torch.zeros(B, T), value=value,
                                                  advantages=advantages, returns=returns))


def test_ppo_summarises_the_whole_buffer_without_its_last_steps():
    ctx = _context()
    alg = _ppo(ctx)
    step_type = torch.tensor([[StepType.FIRST, StepType.MID, StepType.LAST]])
    value = torch.tensor([[1.0, 2.0, 50.0]])
    returns = torch.tensor([[1.0, 3.0, -50.0]])
    adv = torch.tensor([[0.5, -0.5, 9.0]])
    alg.summarize_train(_ppo_buffer(value, returns, adv, step_type), (), LossInfo(loss=1.0))
    got = {t: p[-1][0] for t, p in ctx.summary_writer.points.items()}
    # over the first two steps: returns [1, 3] (Var 1), diff [0, 1] (Var 0.25)
    assert got["Loss/PPOAlgorithm/explained_variance"] == pytest.approx(0.75)
    assert got["Value/PPOAlgorithm/value_max"] == 2.0
    assert got["Value/PPOAlgorithm/return_min"] == 1.0
    assert got["Value/PPOAlgorithm/advantage_mean"] == 0.0
    assert got["Value/PPOAlgorithm/advantage_std"] == 0.5


def test_ppo_with_reward_columns_summarises_each_column():
    ctx = _context()
    alg = _ppo(ctx, columns=2)
    step_type = torch.full((2, 2), int(StepType.MID))
    value = torch.stack([torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.zeros(2, 2)], -1)
    returns = torch.stack([torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
                           torch.tensor([[1.0, 2.0], [3.0, 4.0]])], -1)
    alg.summarize_train(_ppo_buffer(value, returns, torch.zeros(2, 2), step_type), (),
                        LossInfo(loss=1.0))
    got = {t: p[-1][0] for t, p in ctx.summary_writer.points.items()}
    assert got["Loss/PPOAlgorithm/explained_variance_0"] == 1.0
    assert got["Loss/PPOAlgorithm/explained_variance_1"] == pytest.approx(0.0)
    assert got["Value/PPOAlgorithm/value_max_0"] == 4.0 and got["Value/PPOAlgorithm/value_max_1"] == 0.0
    assert "Loss/PPOAlgorithm/explained_variance" not in got


def test_dqn_summarises_q_and_targets_of_the_valid_rows():
    from alf.algorithms.dqn_algorithm import DqnAlgorithm, DqnInfo
    from alf.tensor_specs import BoundedTensorSpec, TensorSpec
    ctx = _context()
    alg = DqnAlgorithm(TensorSpec((3,)), BoundedTensorSpec((), torch.int64, 0, 1), context=ctx)
    info = DqnInfo(q_value=torch.tensor([1.0, 2.0, -99.0], requires_grad=True),
                   target=torch.tensor([2.0, 4.0, 99.0]), td_error=torch.zeros(3),
                   valid=torch.tensor([1.0, 1.0, 0.0]))
    alg.summarize_train((), info, LossInfo(loss=torch.tensor(1.0), extra={}))
    got = {t: p[-1][0] for t, p in ctx.summary_writer.points.items()}
    assert (got["Value/DqnAlgorithm/q_min"], got["Value/DqnAlgorithm/q_max"]) == (1.0, 2.0)
    assert got["Value/DqnAlgorithm/target_q_mean"] == 3.0
    assert got["Value/DqnAlgorithm/target_q_std"] == 1.0


def test_nothing_is_computed_on_iterations_without_summaries(monkeypatch):
    """A non-summary iteration reduces no tensor and reads nothing from the device."""
    def forbidden(*args, **kwargs):
        raise AssertionError("a statistic was computed on an iteration without summaries")
    monkeypatch.setattr(summary_stats, "tensor_stats", forbidden)
    monkeypatch.setattr(summary_stats, "explained_variance", forbidden)
    ctx = _context(due=False)
    assert not ctx.should_summarize()
    step_type = torch.full((1, 3), int(StepType.MID))
    buf = _ppo_buffer(torch.zeros(1, 3), torch.ones(1, 3), torch.zeros(1, 3), step_type)
    _ppo(ctx).summarize_train(buf, (), LossInfo(loss=1.0))
    assert ctx.summary_writer.points == {}
    # ... and the same call on a due iteration does compute them
    with pytest.raises(AssertionError, match="without summaries"):
        _ppo(_context()).summarize_train(buf, (), LossInfo(loss=1.0))


def test_a_summary_waits_for_the_device_only_to_read_its_values():
    """No op whose result size or value the host must wait for (boolean indexing,
    ``.item()``) while the statistics are computed: on CUDA the one wait is the final
    read (``ScalarBatch.write``)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.add(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    ctx = _context()
    alg = _ppo(ctx, columns=2)
    step_type = torch.tensor([[StepType.FIRST, StepType.MID, StepType.LAST]] * 2)
    value, returns = torch.randn(2, 3, 2), torch.randn(2, 3, 2)
    buf = _ppo_buffer(value, returns, torch.randn(2, 3), step_type)
    batch = ScalarBatch()
    with Ops() as ops:
        summary_stats.add_value_summaries(batch, "A", *alg._value_targets(buf, ()))
    waits = {"nonzero", "masked_select", "_local_scalar_dense", "item", "index"}
    assert not ops.names & waits, sorted(ops.names & waits)
    assert len(batch.write(ctx)) == 2 * (1 + 8) + 4
