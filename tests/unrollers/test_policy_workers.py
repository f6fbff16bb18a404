"""Policy workers act exactly as in-worker inference; deterministic mode stays bit-identical.

Serial mode runs the env worker's loop and the policy worker's server in the
test's process, one request per forward in the order the groups step: the same
batch composition as in-worker inference, so the runs must agree bit for bit
(Categorical, Gaussian and LSTM policies). A batched forward over several groups
must agree with per-group forwards to float tolerance.
"""
import pytest
import torch

from alf import nest as alf_nest
from alf.environments import create_environment

from alf.unrollers.act_inbox import ActInbox
from alf.unrollers.policy_server import ActRequest, PolicyServer
from alf.unrollers.policy_workers import resolve_num_policy_workers
from alf.unrollers.trajectory_slots import TrajectorySlots
from alf.unrollers.weight_channel import WeightChannel
from alf.utils import dist_utils
from alf.utils.tensor_utils import reset_state_if_necessary

APPO = """
APPOAlgorithm.optimizer = @alf.optimizers.Adam()
alf.optimizers.Adam.lr = 1e-3
TrainerConfig.algorithm_ctor = @APPOAlgorithm
TrainerConfig.random_seed = 0
TrainerConfig.num_iterations = 4
TrainerConfig.unroll_length = 8
TrainerConfig.mini_batch_size = 32
TrainerConfig.mini_batch_length = 1
TrainerConfig.num_updates_per_train_iter = 2
TrainerConfig.num_threads = 1
TrainerConfig.evaluate = False
TrainerConfig.summary_interval = 1
TrainerConfig.checkpoint_interval = 1000000
TrainerConfig.async_unroll = True
TrainerConfig.unroll_parameter_update_period = 1
TrainerConfig.env_groups_per_worker = 2
create_environment.num_parallel_environments = 4
create_environment.backend = "sync"
"""
HEADS = {
    "categorical": APPO + """
create_environment.env_name = "CartPole-v1"
ActorDistributionNetwork.fc_layer_params = (16,)
ValueNetwork.fc_layer_params = (16,)
""",
    "gaussian": APPO + """
create_environment.env_name = "Pendulum-v1"
ActorDistributionNetwork.fc_layer_params = (16,)
ValueNetwork.fc_layer_params = (16,)
""",
    "lstm": APPO + """
create_environment.env_name = "CartPole-v1"
create_environment.gym_wrappers = [@MaskVelocityWrapper]
ActorDistributionRNNNetwork.input_fc_layer_params = (16,)
ActorDistributionRNNNetwork.lstm_hidden_size = 8
ActorDistributionRNNNetwork.actor_fc_layer_params = (16,)
ValueRNNNetwork.input_fc_layer_params = (16,)
ValueRNNNetwork.lstm_hidden_size = 8
ValueRNNNetwork.value_fc_layer_params = (16,)
APPOAlgorithm.actor_network_ctor = @ActorDistributionRNNNetwork
APPOAlgorithm.value_network_ctor = @ValueRNNNetwork
TrainerConfig.mini_batch_length = 4
""",
}


def _tensors(trainer):
    """Every parameter and buffer of the learner's algorithm (cloned)."""
    return {k: v.clone() for k, v in trainer.algorithm.state_dict().items()
            if isinstance(v, torch.Tensor)}


@pytest.mark.parametrize("head", sorted(HEADS))
def test_policy_worker_acts_bit_for_bit_as_in_worker_inference(make_trainer, tmp_path, head):
    runs = {}
    for n in (0, 1):
        trainer = make_trainer(tmp_path / f"pw{n}", HEADS[head],
                               ['TrainerConfig.async_mode="serial"',
                                f"TrainerConfig.num_policy_workers={n}"])
        trainer.run()
        assert trainer.unroller.num_policy_workers == n
        runs[n] = (_tensors(trainer), trainer.unroller.metrics.num_env_steps,
                   trainer.unroller.metrics.recent_episodes())
    (a, steps_a, ret_a), (b, steps_b, ret_b) = runs[0], runs[1]
    assert steps_a == steps_b == 4 * 8 * 4
    assert a.keys() == b.keys()
    changed = [k for k in a if not torch.equal(a[k], b[k])]
    assert not changed, f"parameters differ: {changed[:3]}"
    assert ret_a == ret_b


def _server_for(trainer, groups: int, batch: int):
    """A PolicyServer over ``groups`` unshared inboxes/slots of ``batch`` envs, acting with
    the learner's algorithm itself (so its per-group forwards can be compared)."""
    alg = trainer.algorithm
    spec = trainer.learner.experience_spec()
    weights = WeightChannel(alg.rollout_state_dict(), shared=False)
    weights.publish(alg.rollout_state_dict(), 0, (1, 0, 0))
    inboxes = {(0, g): ActInbox(trainer.unroller.time_step_spec(), alg.rollout_state_spec,
                                alg.data_transformer.state_spec, batch, shared=False)
               for g in range(groups)}
    slots = {(0, g): TrajectorySlots(spec, 1, 3, batch, shared=False) for g in range(groups)}
    return PolicyServer(alg, weights, inboxes, slots), inboxes, slots


@pytest.mark.parametrize("head", ["categorical", "lstm"])
def test_batched_forward_agrees_with_per_group_forwards(make_trainer, tmp_path, head):
    trainer = make_trainer(tmp_path / "b", HEADS[head], ['TrainerConfig.async_mode="serial"',
                                                         "TrainerConfig.num_policy_workers=1",
                                                         "TrainerConfig.num_iterations=1"])
    trainer.run()  # trains once: weights that are not the initial ones
    env = create_environment(num_parallel_environments=2)
    server, inboxes, slots = _server_for(trainer, 2, env.batch_size)
    torch.manual_seed(3)
    for g in range(2):  # group 0 at FIRST steps, group 1 mid-episode
        time_step = env.step(env.action_spec().sample((env.batch_size,))) if g else env.reset()
        inboxes[(0, g)].write_time_step(time_step)
    env.close()
    alg = trainer.algorithm
    init = alg.get_initial_rollout_state(env.batch_size)
    reference = {g: init for g in range(2)}  # each group's state, carried by this test
    for step in range(3):  # step 0 acts from the reset states; steps 1-2 from carried ones
        replies = server.act([ActRequest(0, g, 0, step, step) for g in range(2)])
        assert [r.version for r in replies] == [0, 0]
        for g in range(2):
            stored = alf_nest.map_structure(lambda buf: buf[0, step], slots[(0, g)].buffers)
            tts, _ = alg.data_transformer.transform_timestep(inboxes[(0, g)].time_step(), ())
            state = reset_state_if_necessary(reference[g], init, tts.is_first())
            with torch.no_grad():
                dist, value, reference[g] = alg._policy(tts.observation, state)
            if not alf_nest.is_empty(stored.state):  # the state acted from, stored
                for a, b in zip(alf_nest.flatten(stored.state), alf_nest.flatten(state)):
                    assert torch.allclose(a, b, atol=1e-6)
            assert torch.allclose(stored.rollout_info.value, value, atol=1e-6)
            log_prob = dist_utils.compute_log_probability(dist, stored.action)
            assert torch.allclose(stored.rollout_info.log_prob, log_prob, atol=1e-5)


def test_the_default_is_in_worker_inference_on_every_machine():
    """Measured on 16 CPUs + an H100, in-worker inference beat 1 and 2 policy workers; on
    a CPU learner they cannot pay (docs/async.md)."""
    assert resolve_num_policy_workers(None, "cpu") == (
        0, "[alf] async unroll: each env worker acts with its own policy copy "
           "(num_policy_workers=None: a CPU learner; in-worker inference measured fastest, "
           "docs/async.md)")
    assert resolve_num_policy_workers(None, "cuda:0") == (
        0, "[alf] async unroll: each env worker acts with its own policy copy "
           "(num_policy_workers=None: the learner is on cuda:0; in-worker inference measured "
           "fastest, docs/async.md)")
    assert resolve_num_policy_workers(3, "cpu") == (
        3, "[alf] async unroll: 3 policy worker(s) act for the env workers "
           "(num_policy_workers=3)")


def test_more_policy_workers_than_env_workers_is_one_config_error(make_trainer, tmp_path):
    from alf.errors import ConfigError
    with pytest.raises(ConfigError, match=r"num_policy_workers=2 is more than "
                                          r"num_env_workers=1"):
        make_trainer(tmp_path / "x", HEADS["categorical"], ["TrainerConfig.num_policy_workers=2"])


def test_deterministic_mode_with_policy_workers_is_bit_identical(make_trainer, tmp_path):
    mode = ['TrainerConfig.async_mode="deterministic"', "TrainerConfig.num_env_workers=2",
            "TrainerConfig.num_policy_workers=1", "TrainerConfig.env_groups_per_worker=1"]
    # No third run with another seed here: its parameters would differ from the initial
    # weights on (the learner draws them before any worker starts), whatever the policy
    # worker does; test_async_unroller's deterministic-mode test checks that the seed
    # reaches the run (each run starts 3 worker processes, ~9 s of CPU)
    runs = []
    for name in ("a", "b"):
        trainer = make_trainer(tmp_path / name, HEADS["categorical"],
                               mode + ["TrainerConfig.random_seed=0"])
        trainer.run()
        assert trainer.unroller.num_policy_workers == 1
        runs.append(_tensors(trainer))
        lag = trainer.unroller.progress_text()
    a, b = runs
    assert all(torch.equal(a[k], b[k]) for k in a), "same seed: bit-identical"
    assert lag.startswith(" | lag 1/1.0/1"), lag


def test_a_policy_server_acting_in_bf16_drops_its_weight_casts_with_new_weights(
        make_trainer, tmp_path):
    """A policy worker keeps autocast's bf16 weight copies across batches
    (precision.keep_weight_casts); loading a new weights version must drop them: the
    server then acts exactly as a fresh forward on the new weights."""
    from alf.utils import precision
    trainer = make_trainer(tmp_path / "b", HEADS["categorical"],
                           ['TrainerConfig.async_mode="serial"',
                            'TrainerConfig.act_precision="bf16"',
                            "TrainerConfig.num_iterations=1"])
    trainer.run()
    env = create_environment(num_parallel_environments=2)
    server, inboxes, slots = _server_for(trainer, 1, env.batch_size)
    torch.manual_seed(3)
    env.reset()
    inboxes[(0, 0)].write_time_step(env.step(env.action_spec().sample((env.batch_size,))))
    env.close()
    alg = trainer.algorithm
    assert precision.act_dtype_of(alg) == torch.bfloat16
    channel = server._weights
    new = {k: v + 0.3 * torch.randn_like(v) if v.is_floating_point() else v.clone()
           for k, v in alg.rollout_state_dict().items()}

    def logits_now():
        tts, _ = alg.data_transformer.transform_timestep(inboxes[(0, 0)].time_step(), ())
        with torch.no_grad(), precision.autocast_networks(torch.bfloat16):
            dist, _, _ = alg._policy(tts.observation,
                                     alg.get_initial_rollout_state(tts.step_type.shape[0]))
        return dist.logits

    with precision.keep_weight_casts(torch.bfloat16):
        server.act([ActRequest(0, 0, 0, 0, 0)])
        old = slots[(0, 0)].buffers.rollout_info.log_prob[0, 0].clone()
        channel.publish(new, 1, (2, 0, 0))
        server.act([ActRequest(0, 0, 0, 1, 1)])
        acted = slots[(0, 0)].buffers
        log_prob = acted.rollout_info.log_prob[0, 1]
        action = acted.action[0, 1]
    assert server.version == 1
    expected = torch.distributions.Categorical(logits=logits_now()).log_prob(action)
    assert torch.equal(log_prob, expected)  # the new weights' casts, not the old ones'
    assert not torch.equal(log_prob, old)
