"""ActStep: transform -> reset the policy state at FIRST -> act -> optional override."""
import torch

from alf.data_structures import AlgStep, Experience, StepType, TimeStep
from alf.tensor_specs import BoundedTensorSpec
from alf.utils.act_step import ActStep, random_actions

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST


def _ts(step_types, obs=None):
    st = torch.tensor(step_types, dtype=torch.int32)
    b = len(step_types)
    return TimeStep(step_type=st, reward=torch.zeros(b), discount=torch.ones(b),
                    observation=torch.arange(b, dtype=torch.float32) if obs is None else obs,
                    prev_action=torch.zeros(b, dtype=torch.int64),
                    env_id=torch.arange(b, dtype=torch.int64))


class AddOne:
    """Transformer: observation + 1; its state counts the steps it saw."""

    def transform_timestep(self, time_step, state):
        return time_step._replace(observation=time_step.observation + 1), state + 1


class Recorder:
    """Policy: action = observation as int64; state + 10; remembers its inputs."""

    def __init__(self):
        self.seen = []

    def __call__(self, time_step, state):
        self.seen.append((time_step, state))
        return AlgStep(output=time_step.observation.to(torch.int64),
                       state=state + 10 if isinstance(state, torch.Tensor) else state,
                       info={"obs": time_step.observation})


def test_transforms_then_resets_first_rows_then_acts():
    policy = Recorder()
    init = torch.full((3,), -1.0)
    act = ActStep(AddOne(), policy, init)
    assert act.stateful
    state = torch.tensor([5.0, 6.0, 7.0])
    acted = act(_ts([F, M, L]), state, torch.tensor(0))

    seen_ts, seen_state = policy.seen[0]
    assert torch.equal(seen_ts.observation, torch.tensor([1.0, 2.0, 3.0]))  # transformed
    assert torch.equal(seen_state, torch.tensor([-1.0, 6.0, 7.0]))  # row 0 (FIRST) reset
    assert torch.equal(acted.state, seen_state)  # the state the policy acted from
    assert torch.equal(acted.alg_step.state, torch.tensor([9.0, 16.0, 17.0]))
    assert int(acted.transformer_state) == 1
    assert torch.equal(acted.action, torch.tensor([1, 2, 3]))
    assert acted.time_step is seen_ts


def test_override_replaces_the_action_after_the_policy_acted():
    policy = Recorder()
    act = ActStep(AddOne(), policy, torch.zeros(2))
    calls = []

    def override(alg_step):
        calls.append(len(policy.seen))  # the policy has already acted
        return alg_step.output * 100

    acted = act(_ts([M, M]), torch.zeros(2), torch.tensor(0), override)
    assert calls == [1]
    assert torch.equal(acted.action, torch.tensor([100, 200]))
    assert torch.equal(acted.alg_step.output, acted.action)
    assert torch.equal(acted.alg_step.state, torch.full((2,), 10.0))  # kept


def test_stateless_policy_gets_its_state_untouched_and_stores_no_state():
    policy = Recorder()
    act = ActStep(AddOne(), policy, ())
    assert not act.stateful
    acted = act(_ts([F, M]), (), torch.tensor(0))
    assert policy.seen[0][1] == ()
    exp = acted.experience()
    assert isinstance(exp, Experience) and exp.state == ()


def test_experience_holds_the_transformed_step_the_action_the_info_and_the_state_before():
    act = ActStep(AddOne(), Recorder(), torch.zeros(2))
    acted = act(_ts([F, M]), torch.tensor([3.0, 4.0]), torch.tensor(0),
                lambda s: s.output + 7)
    exp = acted.experience()
    assert exp.time_step is acted.time_step
    assert torch.equal(exp.action, torch.tensor([8, 9]))
    assert torch.equal(exp.rollout_info["obs"], torch.tensor([1.0, 2.0]))
    assert torch.equal(exp.state, torch.tensor([0.0, 4.0]))


def test_random_actions_sample_the_spec_from_the_global_stream():
    spec = BoundedTensorSpec((), torch.int64, 0, 5)
    override = random_actions(spec)
    step = AlgStep(output=torch.zeros(4, dtype=torch.int64))
    torch.manual_seed(3)
    got = override(step)
    torch.manual_seed(3)
    expected = spec.sample((4,))
    assert torch.equal(got, expected) and got.dtype == torch.int64
    cont = BoundedTensorSpec((2,), torch.float32, -1.0, 1.0)
    got = random_actions(cont, device="cpu")(AlgStep(output=torch.zeros(3, 2)))
    assert got.shape == (3, 2) and bool(((got >= -1) & (got <= 1)).all())
