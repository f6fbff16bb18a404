"""``Agent``: one RL algorithm and sub-algorithms in roles, composed from gin
(docs/design/agent.md).

::

    TrainerConfig.algorithm_ctor = @Agent
    Agent.rl_algorithm_cls = @PPOAlgorithm
    Agent.reward_modules = [@RNDRewardModule]
    Agent.reward_weights = [1.0, 0.5]          # extrinsic, then one per module
    Agent.representation_learner_cls = @LatentDynamicsLearner   # optional

What the RL algorithm sees: the observation as the representation learner encodes it
(when there is one; acting and training alike), and the env's reward replaced by the
reward columns ``[B, T, k]`` (the extrinsic reward, then each module's intrinsic
reward) for PPO, APPO and IMPALA, which learn one value per column and follow the
weighted sum of the columns' advantages (``alf/algorithms/reward_columns.py``), or by
their weighted sum for the other algorithms; rewards are computed on the learner from the
stored observations when a batch is trained on (``preprocess_experience``: every
replay regime, async batches, offline and hybrid batches pass through it); nothing
else changes for it, and nothing extra is stored or sent to actors (reward modules
are left out of ``rollout_state_dict``). The reward of step ``t`` belongs to the
transition ``t-1 -> t``, so a module sees ``(observation[t-1], prev_action[t],
observation[t])`` of one sequence; a sequence's first step (and the first step of an
episode) gets no intrinsic reward, which no algorithm trains on.

Each part updates with its own optimizer on the same batch: the RL algorithm's own
``train_on_batch`` on the encoded observations (its overrides keep working), then the
representation learner's and each module's ``update``. With
``encoder_trained_by_rl`` (shared) the RL loss's gradient reaches the encoder too,
and the representation learner's optimizer steps it on the sum of both. The Agent has the RL
algorithm's training regime (on-policy, whole buffer, ...), specs and states, so the
Learner, unrollers, learner thread and torchrun treat it as that algorithm.

On-policy algorithms that train through the rollout's graph (A2C): the reward is
composed while acting (the previous observation rides in the rollout state), the
encoder runs inside that graph, and the parts train on the unroll's transitions
after the RL update.

An env's own vector reward ``[d]`` (alf/environments/vector_reward.py) gives ``d``
extrinsic columns ahead of the modules' (``reward_weights`` then has ``d + m``
entries); with no module at all the Agent is how an algorithm that learns from a
scalar reward (SAC, DQN, ...) weighs those columns.

A recurrent representation learner (an encoder with a state: features of the history)
has its state carried in the Agent's (``AgentState.representation``): reset at episode
starts like any policy state, stored with each step, and the start of every trained
sequence ``[B, L]``, which the encoder runs over (truncated back-propagation through
``L`` steps); the learner trains by its ``sequence_loss`` on the same sequences.
"""
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

import torch

import alf
from alf import nest as alf_nest
from alf.algorithms import agent_checks
from alf.algorithms.algorithm import Algorithm
from alf.algorithms.collected_transitions import CollectedTransitions
from alf.algorithms.ppo_algorithm import PPOAlgorithm
from alf.algorithms.representation_learner import RepresentationLearner
from alf.algorithms import reward_weights
from alf.algorithms.reward_module import RewardModule
from alf.algorithms.rl_algorithm import RLAlgorithm
from alf.data_structures import AlgStep, Experience, LossInfo, StepType, TimeStep
from alf.config_ranges import FiniteSchedule
from alf.errors import ConfigError
from alf.tensor_specs import TensorSpec
from alf.utils.run_context import RunContext
from alf.utils.schedules import ConstantSchedule, ScheduleLike, as_schedule

#: what the Agent takes over from its RL algorithm (read by the Learner and the Trainer)
_REGIME = ("on_policy", "whole_replay_buffer_training", "clear_replay_buffer",
           "replay_sample_blocks", "learner_class", "trains_on_behaviour_log_probs")


class AgentState(NamedTuple):
    """The Agent's state where it needs one of its own (else it is the RL algorithm's):
    the RL algorithm's state, the observation ``[B, ...]`` of the previous step (around
    an on-policy algorithm with reward modules: the modules' transition
    ``prev_observation -> observation`` while acting) and a recurrent representation
    learner's encoder state ``[B, ...]``; ``()`` where unused."""
    rl: Any = ()
    prev_observation: Any = ()
    representation: Any = ()


#: the name of AgentState before recurrent representation learners
OnPolicyAgentState = AgentState


@alf.configurable
class Agent(RLAlgorithm):
    """An RL algorithm with intrinsic-reward modules and a representation learner.

    Args:
        observation_spec, action_spec, reward_spec, context, debug_summaries: see
            :class:`RLAlgorithm` (the env's; ``reward_spec`` a scalar or ``[d]``: the
            env's own reward columns, each an extrinsic column).
        rl_algorithm_cls: the RL algorithm's constructor (any bundled one, configured
            in gin as usual: ``PPOAlgorithm.gamma = ...``).
        reward_modules: constructors of :class:`RewardModule` s, called with
            ``observation_spec``, ``action_spec`` and ``context``.
        reward_weights: ``[d + len(reward_modules)]`` (``d`` = 1 for a scalar env
            reward): each extrinsic column's weight, then each module's (default: all 1). Each is a number or a schedule of the
            run's progress (``@LinearSchedule()``, alf/utils/schedules.py), read for each
            trained batch; :meth:`set_reward_weights` fixes them from then on. The
            current weights (and whether they were fixed) are checkpointed; on resume
            the config's weights replace them unless they were fixed and the config
            is unchanged (alf/algorithms/reward_weights.py).
        representation_learner_cls: constructor of a :class:`RepresentationLearner`
            (called with ``observation_spec``, ``action_spec`` and ``context``) whose
            features ``[N, F]`` the RL algorithm receives as its observation; None:
            the RL algorithm sees the observation itself.
        encoder_trained_by_rl: with a representation learner: whether the RL loss's
            gradient also trains the encoder (shared), or only the learner's own loss
            does (separate).
        value_per_reward_column: with reward modules or an env's reward columns:
            whether the RL algorithm learns one value per reward column, each with its
            module's ``gamma`` and
            ``episodic`` setting, and follows ``sum_i w_i A_i`` (docs/design/agent.md,
            decision 3), or sees the weighted sum as its reward. None: per column where
            the RL algorithm supports it (PPO, APPO, IMPALA), else the sum.
        name: used in summary tags.
        is_eval: build for evaluation only (``alf.bin.play``): the RL algorithm built
            with ``is_eval=True`` where its constructor takes it, no reward module (they
            only train); a training checkpoint loads into it (docs/design/eval_builds.md).
    """

    #: the env's reward may have columns (RLAlgorithm refuses them for the others)
    supports_reward_columns = True

    def __init__(self, observation_spec: Any, action_spec: Any,
                 reward_spec: Any = TensorSpec(()),
                 rl_algorithm_cls: Callable[..., RLAlgorithm] = PPOAlgorithm,
                 reward_modules: Sequence[Callable[..., RewardModule]] = (),
                 reward_weights: Optional[Sequence[FiniteSchedule]] = None,
                 representation_learner_cls: Optional[
                     Callable[..., RepresentationLearner]] = None,
                 encoder_trained_by_rl: bool = True,
                 value_per_reward_column: Optional[bool] = None,
                 context: Optional[RunContext] = None, debug_summaries: bool = False,
                 name: str = "Agent", is_eval: bool = False):
        reward_modules = agent_checks.check_agent_args(
            type(self), rl_algorithm_cls, reward_modules, reward_weights,
            representation_learner_cls)
        num_extrinsic = _num_extrinsic_columns(reward_spec)
        representation = _build_representation(representation_learner_cls, observation_spec,
                                                action_spec, context)
        rl_observation_spec = observation_spec
        if representation is not None:
            rl_observation_spec = representation.output_spec
            context = representation.context
        per_column = _per_column(rl_algorithm_cls, value_per_reward_column,
                                 len(reward_modules) + (num_extrinsic if reward_spec.shape else 0))
        num_columns = num_extrinsic + len(reward_modules)
        rl_reward_spec = TensorSpec((num_columns,)) if per_column else TensorSpec(())
        rl = rl_algorithm_cls(observation_spec=rl_observation_spec, action_spec=action_spec,
                              reward_spec=rl_reward_spec, context=context,
                              **agent_checks.eval_kwargs(rl_algorithm_cls, is_eval))
        # an evaluation-only build acts: no reward module (docs/design/eval_builds.md)
        modules = [] if is_eval else [
            ctor(observation_spec=observation_spec, action_spec=action_spec,
                 context=rl.context) for ctor in reward_modules]
        for m in modules:
            if not isinstance(m, RewardModule):
                raise ConfigError(f"Agent.reward_modules: {type(m).__name__} is not a "
                                  "RewardModule (alf.algorithms.reward_module)")
            m.check_training_setup()
        schedules = _weight_schedules(reward_weights, num_columns, num_extrinsic)
        self._num_extrinsic = num_extrinsic
        self._vector_env_reward = bool(reward_spec.shape)
        self._composes = bool(modules) or self._vector_env_reward
        # on-policy (A2C): rewards are composed while acting, from the previous observation
        self._rewards_in_rollout = bool(rl.on_policy and self._composes)
        self._recurrent = representation is not None and representation.is_recurrent
        repr_state = representation.state_spec if self._recurrent else ()
        rollout_state_spec = (
            AgentState(rl.rollout_state_spec,
                       observation_spec if self._rewards_in_rollout else (), repr_state)
            if self._rewards_in_rollout or self._recurrent else rl.rollout_state_spec)
        predict_state_spec = (AgentState(rl.predict_state_spec, (), repr_state)
                              if self._recurrent else rl.predict_state_spec)
        super().__init__(observation_spec, action_spec, reward_spec, context=rl.context,
                         train_state_spec=rl.train_state_spec,
                         rollout_state_spec=rollout_state_spec,
                         predict_state_spec=predict_state_spec,
                         debug_summaries=debug_summaries, name=name)
        self._rl = rl
        self._per_column = per_column
        if is_eval:  # what the full build has and this one leaves out (alf.experiment)
            self.eval_omitted = ("_reward_modules",)
        if per_column and not is_eval:  # the extrinsic columns: the RL algorithm's gamma, episodic
            rl.reward_columns.configure(
                gammas=[None] * num_extrinsic + [m.gamma for m in modules],
                episodic=[True] * num_extrinsic + [m.episodic for m in modules])
        self._representation = representation
        self._encoder_trained_by_rl = bool(encoder_trained_by_rl)
        self._reward_modules = torch.nn.ModuleList(modules)
        self._collected = CollectedTransitions()  # what observe_collected hands the modules
        for m in modules:
            self.exclude_from_rollout(m)  # trained and used on the learner only
        self._weight_schedules = schedules
        self._scheduled = not all(isinstance(w, ConstantSchedule) for w in schedules)
        self._configured_weights = torch.tensor([float(w(0.0)) for w in schedules],
                                                dtype=torch.float32)
        self.register_buffer("_reward_weights", self._configured_weights.clone())
        self.restore_notes: List[str] = []  # what a restore replaced (the Trainer says it)
        # set_reward_weights was called: the schedules no longer apply (survives a resume)
        self.register_buffer("_reward_weights_fixed", torch.tensor(False))
        for attr in _REGIME:  # the Learner reads these from the algorithm it trains
            setattr(self, attr, getattr(rl, attr))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # the config's weights replace the checkpoint's copy, unless set_reward_weights
        # fixed them and the config is unchanged (alf/algorithms/reward_weights.py)
        note = reward_weights.restore(state_dict, prefix, self._weight_schedules,
                                      self._configured_weights)
        self.restore_notes = [note] if note else []
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def get_extra_state(self) -> Any:
        """The optimizers' states and the configured reward weights (what a resume
        compares the config with: alf/algorithms/reward_weights.py)."""
        state = super().get_extra_state()
        state[reward_weights.CONFIG_KEY] = reward_weights.configured_values(
            self._weight_schedules)
        return state

    # ------------------------------------------------------------- parts
    @property
    def rl_algorithm(self) -> RLAlgorithm:
        return self._rl

    @property
    def representation_learner(self) -> Optional[RepresentationLearner]:
        return self._representation

    @property
    def reward_modules(self) -> List[RewardModule]:
        return list(self._reward_modules)

    @property
    def reward_weights(self) -> torch.Tensor:
        """``[d + len(reward_modules)]``: extrinsic, then each module's, as of the last
        trained batch (or the last :meth:`set_reward_weights`)."""
        return self._reward_weights

    @property
    def reward_column_names(self) -> List[str]:
        """``"extrinsic"`` (``"extrinsic_0"``, ... for an env's reward columns), then each
        reward module's name (summary tags)."""
        extrinsic = ([f"extrinsic_{i}" for i in range(self._num_extrinsic)]
                     if self._vector_env_reward else ["extrinsic"])
        return extrinsic + [m.name for m in self._reward_modules]

    def set_reward_weights(self, weights: Sequence[float]) -> None:
        """Fix the weights from the next trained batch on, replacing any schedules in
        ``reward_weights`` for the rest of the run (every stored step's reward is
        composed when it is trained on, so the change applies to all of them).

        Takes ``RunContext.weights_lock`` (held already by a Trainer callback), under
        which a learner thread reads the weights for its batch.

        Raises:
            ValueError: not one weight per reward column, or a weight not finite.
        """
        w = torch.as_tensor(weights, dtype=torch.float32).reshape(-1)
        if w.numel() != self._reward_weights.numel():
            raise ValueError(f"Agent.set_reward_weights: {w.numel()} weights for "
                             f"{self._reward_weights.numel()} reward columns")
        bad = (~torch.isfinite(w)).nonzero().flatten().tolist()
        if bad:
            i = bad[0]
            raise ValueError(f"Agent.set_reward_weights: the weight of column {i} "
                             f"({self.reward_column_names[i]}) is {w[i].item()}: each "
                             "weight must be a finite number")
        with self._context.weights_lock:
            self._reward_weights.copy_(w)
            self._reward_weights_fixed.fill_(True)

    def _current_reward_weights(self) -> torch.Tensor:
        """The weights ``[k]`` for this batch (a copy): the schedules at the run's progress,
        unless fixed. Read under ``weights_lock``: the fixed flag and the weights together,
        never between a callback's set_reward_weights (main thread) writing them."""
        with self._context.weights_lock:
            if self._scheduled and not bool(self._reward_weights_fixed):
                progress = self._context.progress()
                self._reward_weights.copy_(torch.tensor(
                    [float(s(progress)) for s in self._weight_schedules], dtype=torch.float32))
            return self._reward_weights.clone()

    # ----------------------------------------------------------- regime
    def uses_regime(self, name: str, config: Any) -> bool:
        return self._rl.uses_regime(name, config)

    def check_training_config(self, config: Any) -> None:
        self._rl.check_training_config(config)
        length = self._rl.replay_sequence_length() or config.mini_batch_length
        if self._recurrent and not self._rl.on_policy and length < 2:
            raise ConfigError(
                f"{self._representation.name} is recurrent and learns from sequences, and "
                "the mini-batches hold single steps: set TrainerConfig.mini_batch_length to "
                "2 or more")
        if not self._rl.on_policy:  # else the parts train on the unroll's transitions
            agent_checks.check_single_step_parts(
                list(self._reward_modules) + [self._representation], length)

    def replay_sequence_length(self) -> Optional[int]:
        return self._rl.replay_sequence_length()

    # ----------------------------------------------------------- acting
    def _represented(self, time_step: TimeStep, state: Any = ()) -> Tuple[TimeStep, Any]:
        """``(time_step with the observation [N, ...] encoded to [N, F], the encoder's
        next state)`` (unchanged without a representation learner; ``state`` is a
        recurrent encoder's)."""
        if self._representation is None:
            return time_step, state
        features, state = self._representation.encode_step(time_step.observation, state)
        return time_step._replace(observation=features), state

    def predict_step(self, time_step: TimeStep, state: Any) -> AlgStep:
        if not self._recurrent:
            return self._rl.predict_step(self._represented(time_step)[0], state)
        ts, repr_state = self._represented(time_step, state.representation)
        step = self._rl.predict_step(ts, state.rl)
        return step._replace(state=AgentState(step.state, (), repr_state))

    def rollout_step(self, time_step: TimeStep, state: Any) -> AlgStep:
        if not (self._rewards_in_rollout or self._recurrent):
            return self._rl.rollout_step(self._represented(time_step)[0], state)
        if self._rewards_in_rollout:
            # on-policy with reward modules: the RL algorithm acts on (and its loss trains
            # through) the composed reward of this step's transition
            time_step = time_step._replace(
                reward=self._step_reward(time_step, state.prev_observation))
        ts, repr_state = self._represented(time_step, state.representation)
        step = self._rl.rollout_step(ts, state.rl)
        prev_observation = time_step.observation if self._rewards_in_rollout else ()
        return step._replace(state=AgentState(step.state, prev_observation, repr_state))

    def _step_reward(self, ts: TimeStep, prev_observation: Any) -> torch.Tensor:
        """``[B]``: the weighted sum of the extrinsic reward and each module's reward of
        ``prev_observation -> ts.observation`` (0 at an episode's first step)."""
        w = self._weights_for_batch().to(ts.reward.dtype)
        total = self._weighted_extrinsic(ts.reward, w)
        valid = ts.step_type != StepType.FIRST
        n = self._num_extrinsic
        for i, module in enumerate(self._reward_modules):
            with torch.no_grad():
                r = module.reward(prev_observation, ts.prev_action, ts.observation)
            r = r.to(ts.reward.dtype) * valid
            total = total + w[n + i] * r
            if self._context.should_summarize():
                self._context.add_iteration_scalar(
                    f"Reward/{module.name}/mean", float(r.sum() / valid.sum().clamp(min=1)))
        return total

    # --------------------------------------------------------- training
    def preprocess_experience(self, experience: Experience) -> Experience:
        """``[B, T]`` in: the reward replaced by the weighted sum of the extrinsic and the
        intrinsic rewards, then the RL algorithm's own preprocessing, on the encoded
        observations (no gradient). What comes out keeps the raw observations (the
        encoder runs again, with gradient, when the batch is trained on): the RL
        algorithm's preprocessing may keep a prefix of the time axis (PPO, APPO and
        IMPALA drop the bootstrap step), nothing else."""
        if self._composes:
            compose = self._reward_columns if self._per_column else self._composed_reward
            experience = experience._replace(time_step=experience.time_step._replace(
                reward=compose(experience.time_step)))
        if self._representation is None:
            return self._rl.preprocess_experience(experience)
        if type(self._rl).preprocess_experience is Algorithm.preprocess_experience:
            return experience  # the identity (SAC, DQN, ...): no need to encode for it
        raw = experience.time_step.observation
        with torch.no_grad():
            out = self._rl.preprocess_experience(_encoded(experience, self._representation))
        steps = experience.time_step.step_type
        kept = out.time_step.step_type
        if not (kept.shape[0] == steps.shape[0] and kept.shape[1] <= steps.shape[1]
                and torch.equal(kept, steps[:, :kept.shape[1]])):
            raise ConfigError(
                f"Agent: {type(self._rl).__name__}.preprocess_experience reshapes the batch "
                f"{tuple(steps.shape)} -> {tuple(kept.shape)} in a way a representation "
                "learner cannot follow (it may keep a prefix of the time axis)")
        length = kept.shape[1]
        out = out._replace(time_step=out.time_step._replace(
            observation=alf_nest.map_structure(lambda x: x[:, :length], raw)))
        if isinstance(experience.state, AgentState):  # the Agent's state, not the RL one's
            out = out._replace(state=alf_nest.map_structure(lambda x: x[:, :length],
                                                            experience.state))
        return out

    def _transitions(self, ts: TimeStep) -> Tuple[Any, Any, Any, torch.Tensor]:
        """``(prev_observation, prev_action, observation, valid)`` flattened to
        ``[B * (T - 1)]`` from a ``[B, T]`` time step; ``valid``: not an episode's
        first step (whose predecessor belongs to another episode)."""
        def flat(x):
            return x.reshape((-1,) + tuple(x.shape[2:]))
        prev_obs = alf_nest.map_structure(lambda x: flat(x[:, :-1]), ts.observation)
        obs = alf_nest.map_structure(lambda x: flat(x[:, 1:]), ts.observation)
        prev_action = alf_nest.map_structure(lambda x: flat(x[:, 1:]), ts.prev_action)
        valid = flat(ts.step_type[:, 1:] != StepType.FIRST)
        return prev_obs, prev_action, obs, valid

    def _weights_for_batch(self) -> torch.Tensor:
        """The reward weights ``[k]`` for this batch (schedules applied), summarised."""
        w = self._current_reward_weights()
        if self._context.should_summarize():
            for name, weight in zip(self.reward_column_names, w.tolist()):
                self._context.add_iteration_scalar(f"Reward/{name}/weight", weight,
                                                   reduce="last")
        return w

    def _intrinsic_rewards(self, ts: TimeStep) -> List[torch.Tensor]:
        """Each module's reward ``[B, T]`` (0 at a sequence's first step, which has no
        predecessor, and at an episode's first step), its mean summarised."""
        B, T = ts.step_type.shape[:2]
        if T < 2:
            return [torch.zeros((B, T), dtype=ts.reward.dtype, device=ts.reward.device)
                    for _ in self._reward_modules]
        prev_obs, prev_action, obs, valid = self._transitions(ts)
        summarize = self._context.should_summarize()
        out = []
        for module in self._reward_modules:
            with torch.no_grad():
                r = module.reward(prev_obs, prev_action, obs).to(ts.reward.dtype)
            r = (r * valid).reshape(B, T - 1)
            out.append(torch.cat([torch.zeros_like(r[:, :1]), r], dim=1))
            if summarize:
                self._context.add_iteration_scalar(
                    f"Reward/{module.name}/mean",
                    float(r.sum() / valid.sum().clamp(min=1)), reduce="last")
        return out

    def _composed_reward(self, ts: TimeStep) -> torch.Tensor:
        """``[B, T]`` weighted sum of the extrinsic reward and each module's."""
        w = self._weights_for_batch().to(ts.reward.dtype)
        self._summarize_env_columns(ts.reward)
        total = self._weighted_extrinsic(ts.reward, w)
        for i, r in enumerate(self._intrinsic_rewards(ts)):
            total[:, 1:] += w[self._num_extrinsic + i] * r[:, 1:]
        return total

    def _summarize_env_columns(self, reward: torch.Tensor) -> None:
        """``Reward/extrinsic_<i>/mean`` of an env's reward columns ``[B, T, d]`` in a
        trained batch (a scalar env reward is the progress line's return)."""
        if self._vector_env_reward and self._context.should_summarize():
            for i, mean in enumerate(reward.reshape(-1, self._num_extrinsic).mean(0).tolist()):
                self._context.add_iteration_scalar(f"Reward/extrinsic_{i}/mean", mean,
                                                   reduce="last")

    def _weighted_extrinsic(self, reward: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """``[...]``: the env's reward ``[...]`` (or its columns ``[..., d]``) weighted."""
        if self._vector_env_reward:
            return (reward * w[:self._num_extrinsic]).sum(-1)
        return w[0] * reward

    def _reward_columns(self, ts: TimeStep) -> torch.Tensor:
        """``[B, T, k]``: the extrinsic reward, then each module's (unweighted: the RL
        algorithm weights the columns' advantages); its weights are set for the batch."""
        self._rl.reward_columns.set_weights(self._weights_for_batch())
        self._summarize_env_columns(ts.reward)
        extrinsic = ts.reward if self._vector_env_reward else ts.reward.unsqueeze(-1)
        return torch.cat([extrinsic] + [r.unsqueeze(-1) for r in self._intrinsic_rewards(ts)],
                         dim=-1)

    def train_from_unroll(self, experience: Experience) -> LossInfo:
        """On-policy (A2C, REINFORCE): the RL algorithm's own update from the fresh unroll
        ``[T, B]`` (its rewards composed while acting, its graph through a shared
        encoder), then the representation learner's and each reward module's on the
        unroll's transitions."""
        if self._representation is not None and self._encoder_trained_by_rl:
            self._representation.clear_grads()  # the RL backward adds this unroll's
        loss_info = self._rl.train_from_unroll(experience)
        if self._representation is not None or self._reward_modules:
            batch_major = alf_nest.map_structure(lambda x: x.transpose(0, 1), experience)
            # the parts' losses start new graphs: the rollout's (A2C's) is spent
            batch_major = batch_major._replace(
                time_step=batch_major.time_step._replace(
                    observation=alf_nest.map_structure(lambda x: x.detach(),
                                                       batch_major.time_step.observation)),
                state=alf_nest.map_structure(lambda x: x.detach(), batch_major.state))
            if self._representation is not None:
                self._update_representation(batch_major)
            self._update_reward_modules(batch_major)
        return loss_info

    def train_on_batch(self, experience: Experience) -> Tuple[LossInfo, Any]:
        """The RL algorithm's gradient step on ``experience [B, L]`` (observations
        encoded, with gradient into a shared encoder), then the representation
        learner's and each reward module's on the same observations (each with its own
        optimizer)."""
        if self._representation is None:
            loss_info, info = self._rl.train_on_batch(experience)
        else:
            loss_info, info = self._train_rl_on_features(experience)
            self._update_representation(experience)
        self._update_reward_modules(experience)
        return loss_info, info

    def _update_reward_modules(self, experience: Experience) -> None:
        """Each reward module's step on the transitions of ``experience [B, L]``."""
        if self._reward_modules and experience.time_step.step_type.shape[1] >= 2:
            prev_obs, prev_action, obs, valid = self._transitions(experience.time_step)
            for module in self._reward_modules:  # each summarises its loss
                module.update(prev_obs, prev_action, obs, valid)
        elif self._reward_modules:
            self._update_on_single_steps(experience)

    def _train_rl_on_features(self, experience: Experience) -> Tuple[LossInfo, Any]:
        """The RL algorithm's step on the encoded batch. Shared: the encoder's gradients
        are cleared first and the RL loss's stay on it for the representation step."""
        representation = self._representation
        if self._encoder_trained_by_rl:
            representation.clear_grads()
            return self._rl.train_on_batch(_encoded(experience, representation))
        with torch.no_grad():
            encoded = _encoded(experience, representation)
        return self._rl.train_on_batch(encoded)

    def _update_representation(self, experience: Experience) -> None:
        """The representation learner's step on the batch's transitions ``[B * (L-1)]``
        (or single steps for a learner that needs no previous step)."""
        representation = self._representation
        ts = experience.time_step
        keep = self._encoder_trained_by_rl
        if self._recurrent:
            self._update_recurrent_representation(experience)
            return
        if ts.step_type.shape[1] >= 2:
            prev_obs, prev_action, obs, valid = self._transitions(ts)
        elif representation.uses_previous_step:
            raise ConfigError(
                f"{representation.name} learns from transitions (previous observation and "
                "action) and the mini-batches hold single steps: set "
                "TrainerConfig.mini_batch_length to 2 or more")
        else:
            prev_obs = None
            obs = alf_nest.map_structure(lambda x: x[:, 0], ts.observation)
            prev_action = alf_nest.map_structure(lambda x: x[:, 0], ts.prev_action)
            valid = torch.ones_like(ts.step_type[:, 0], dtype=torch.bool)
        representation.update(prev_obs, prev_action, obs, valid, keep_existing_grads=keep)

    def _update_recurrent_representation(self, experience: Experience) -> None:
        """A recurrent learner's step on the batch's sequences ``[B, L]``, from the encoder
        state stored with each sequence's first step."""
        representation = self._representation
        ts = experience.time_step
        if ts.step_type.shape[1] < 2:
            raise ConfigError(
                f"{representation.name} is recurrent and learns from sequences, and the "
                "mini-batches hold single steps: set TrainerConfig.mini_batch_length to 2 "
                "or more")
        initial = alf_nest.map_structure(lambda x: x[:, 0], experience.state.representation)
        representation.update_on_sequence(
            ts.observation, ts.prev_action, ts.step_type, initial,
            keep_existing_grads=self._encoder_trained_by_rl)

    def _update_on_single_steps(self, experience: Experience) -> None:
        """``[B, 1]`` batches (``mini_batch_length=1``): modules that need only the
        arrived-at observation (:attr:`RewardModule.uses_previous_step` False) train on
        each step's; the others cannot (one error naming the setting)."""
        ts = experience.time_step
        obs = alf_nest.map_structure(lambda x: x[:, 0], ts.observation)
        prev_action = alf_nest.map_structure(lambda x: x[:, 0], ts.prev_action)
        valid = ts.step_type[:, 0] != StepType.FIRST
        for module in (m for m in self._reward_modules if m.trains):
            if module.uses_previous_step:
                raise ConfigError(
                    f"{module.name} learns from transitions (previous observation and "
                    "action) and the mini-batches hold single steps: set "
                    "TrainerConfig.mini_batch_length to 2 or more")
            module.update(None, prev_action, obs, valid)

    def observe_collected(self, experience: Experience, bootstrap_last: bool) -> None:
        """Each new step of a collected unroll ``[T(+1), B]``, once, to the RL algorithm and
        to every reward module's :meth:`~RewardModule.observe` (with the step before it in
        its env: alf/algorithms/collected_transitions.py)."""
        self._rl.observe_collected(experience, bootstrap_last)
        observers = [m for m in self._reward_modules
                     if type(m).observe is not RewardModule.observe]
        if not observers:
            return
        found = self._collected(experience.time_step, bootstrap_last)
        if found is not None:
            found = alf_nest.map_structure(lambda x: x.to(self.device), found)
            with torch.no_grad():
                for module in observers:
                    module.observe(*found)

    def after_train_iter(self, experience: Any, info: Any) -> None:
        self._rl.after_train_iter(experience, info)

    def summarize_train(self, experience: Any, info: Any, loss_info: LossInfo,
                        step: Optional[int] = None) -> None:
        self._rl.summarize_train(experience, info, loss_info, step)


def _num_extrinsic_columns(reward_spec: Any) -> int:
    """``d`` of the env's reward ``[d]`` (1 for a scalar reward)."""
    shape = tuple(getattr(reward_spec, "shape", ()))
    if not isinstance(reward_spec, TensorSpec) or len(shape) > 1:
        raise ConfigError(f"Agent: the env's reward must be a scalar or a vector of columns "
                          f"[d], got reward_spec {reward_spec!r}")
    return int(shape[0]) if shape else 1


def _per_column(rl_algorithm_cls: Any, requested: Optional[bool],
                num_other_columns: int) -> bool:
    """Whether the RL algorithm gets the reward columns (``value_per_reward_column``);
    ``num_other_columns``: the modules' columns plus a vector env reward's."""
    supported = bool(getattr(rl_algorithm_cls, "supports_reward_columns", False))
    if requested and not supported:
        name = getattr(rl_algorithm_cls, "__name__", repr(rl_algorithm_cls))
        raise ConfigError(f"Agent.value_per_reward_column=True: {name} learns from a scalar "
                          "reward; PPOAlgorithm, APPOAlgorithm and ImpalaAlgorithm learn one "
                          "value per column (or leave it unset: the weighted sum)")
    return num_other_columns > 0 and supported and requested is not False


def _build_representation(ctor: Optional[Callable[..., RepresentationLearner]],
                          observation_spec: Any, action_spec: Any,
                          context: Optional[RunContext]) -> Optional[RepresentationLearner]:
    """The representation learner ``ctor`` builds (None without one), checked."""
    if ctor is None:
        return None
    representation = ctor(observation_spec=observation_spec, action_spec=action_spec,
                          context=context)
    if not isinstance(representation, RepresentationLearner):
        raise ConfigError(
            f"Agent.representation_learner_cls: {type(representation).__name__} is "
            "not a RepresentationLearner (alf.algorithms.representation_learner)")
    representation.check_training_setup()
    _check_recurrent(representation)
    return representation


def _weight_schedules(reward_weights: Optional[Sequence[ScheduleLike]], num_columns: int,
                      num_extrinsic: int) -> list:
    """One schedule per reward column from ``Agent.reward_weights`` (default: all 1)."""
    weights = [1.0] * num_columns if reward_weights is None else list(reward_weights)
    if len(weights) != num_columns:
        extrinsic = ("the extrinsic reward's" if num_extrinsic == 1 else
                     f"one per column of the env's reward ({num_extrinsic})")
        raise ConfigError(f"Agent.reward_weights has {len(weights)} values; it needs "
                          f"{num_columns}: {extrinsic}, then one per reward module")
    try:
        return [as_schedule(w) for w in weights]
    except TypeError:
        raise ConfigError(f"Agent.reward_weights = {weights!r}: each must be a number or "
                          "a schedule (e.g. @LinearSchedule())") from None


def _check_recurrent(representation: Optional[RepresentationLearner]) -> None:
    """A recurrent representation learner must say how it trains on sequences."""
    if (representation is not None and representation.is_recurrent
            and type(representation).sequence_loss is RepresentationLearner.sequence_loss):
        raise ConfigError(f"{type(representation).__name__} has a recurrent encoder "
                          "(a non-empty state_spec), so it trains on sequences: it must "
                          "implement sequence_loss (RepresentationLearner.sequence_loss)")


def _encoded(experience: Experience, representation: RepresentationLearner) -> Experience:
    """``experience [B, T]`` for the RL algorithm: each observation replaced by its
    features ``[B, T, F]`` (a recurrent encoder runs from the state stored with each
    sequence's first step) and the Agent's state, if it has one, by the RL algorithm's."""
    ts, state = experience.time_step, experience.state
    initial = ()
    if isinstance(state, AgentState):
        if representation.is_recurrent:
            initial = alf_nest.map_structure(lambda x: x[:, 0], state.representation)
        state = state.rl
    features = representation.encode_sequence(ts.observation, ts.step_type, initial)
    return experience._replace(time_step=ts._replace(observation=features), state=state)
