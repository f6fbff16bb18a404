"""``TrainerConfig``: every knob about *training* (not about an algorithm), with ALF's names."""
from typing import Any, Callable, List, Optional, Sequence, Union

import torch

import alf
from alf.config_checks import check_ranges
from alf.config_ranges import (NonNegative, NonNegativeInt, Positive, PositiveInt, Probability,
                               UnitInterval, UnitIntervalSchedule, at_least)
from alf.errors import ConfigError
from alf.trainers.callbacks import check_callbacks
from alf.trainers.wandb_mirror import check_wandb_config
from alf.utils import precision

_CountOrNoLimit = at_least(0, "0: no limit")
_CountOrNever = at_least(0, "0: never")
_EveryOrOff = at_least(0, "0: off")
_SecondsOrOff = at_least(0, "0: off", float)


@alf.configurable
class TrainerConfig:
    """Training-regime settings. Every argument is bindable from gin as ``TrainerConfig.<name>``.

    Args:
        algorithm_ctor: builds the algorithm as ``ctor(observation_spec=, action_spec=,
            reward_spec=, env=, config=, context=)``.
        data_transformer_ctor: one transformer ctor, a list of them (applied in order), or None.
        random_seed: seeds python, numpy, torch and the envs; None picks one and logs it.
        num_iterations: stop after this many train iterations (0 = no limit).
        num_env_steps: stop after this many environment steps (0 = no limit). At least one
            of ``num_iterations``/``num_env_steps`` must be set; schedules anneal over it.
        stop_at_env_steps: end this process (evaluation, checkpoint, exit 0) once this many
            env steps are done, without changing the horizon ``num_env_steps`` that schedules
            anneal over (0 = off); a resume with a larger value continues. Population-based
            training runs its members in such segments; a cluster's time slices can too.
        unroll_length: env steps per env per iteration; fractional values (e.g. 0.25) unroll
            one step every ``1/unroll_length`` iterations. 0 with ``offline_buffer_dir``:
            pure offline training (no training env; stop by ``num_iterations``).
        async_unroll: collect experience in env worker processes while the learner
            trains (docs/async.md): the same algorithm and gin file, by config alone.
        async_mode: ``"processes"`` (learner takes whatever trajectories are ready),
            ``"deterministic"`` (actors act with exactly the weights one version behind
            the learner; two runs with one seed give bit-identical parameters) or
            ``"serial"`` (the same components in this one process: tests, debuggers).
        max_unroll_length: async with ``unroll_length=0``: the trajectory length; each
            iteration then trains on whatever trajectories are ready.
        unroll_queue_size: async: trajectories that may be buffered between the env
            workers and the learner (all groups together; at least 2 per group, and
            capped so the shared-memory slots stay under 1 GiB).
        unroll_parameter_update_period: async: publish the learner's weights to the env
            workers every this many iterations (1 for APPO/IMPALA).
        num_env_workers: async: env worker processes; the envs
            (``create_environment.num_parallel_environments``) are split evenly.
        env_groups_per_worker: async: env groups per worker, stepped double-buffered
            (the policy acts for one group while the others' envs step); 1 disables it.
            Left at the default, it is lowered (with a note) to the largest count that
            splits a worker's envs evenly (1 for a single env).
        env_worker_threads: async: torch threads and env-engine (ale-py/envpool) threads
            per env group in a worker (and torch threads per policy worker).
        num_policy_workers: async: policy worker processes (Sample Factory's) that act
            for every env group of every env worker with one batched forward on
            ``device``; the env workers then hold no network. 0: each env worker acts
            with its own copy (in-worker inference). None: 0 on every machine, said in
            the log (measured fastest on 16 CPUs + an H100, docs/async.md). At most
            ``num_env_workers``; above 0 only with ``async_unroll=True`` (refused
            otherwise: a sync run acts in its own process).
        max_policy_lag: async ``"processes"``: discard (and count) trajectories collected
            with weights more than this many versions behind the learner (None: keep all).
        env_worker_timeout_s: async: an env worker that reports nothing for this long is
            named in the log and restarted (also the start-up limit, extended up to 10
            times for a worker still busy on a CPU: a slow start on a busy machine).
        max_env_worker_restarts: async: restarts (all workers together) before the run
            stops with an error.
        initial_collect_steps: off-policy: env steps of random actions before training starts.
        overwrite_policy_output: store the action the env executed instead of the one
            the policy chose (ALF's ``overwrite_policy_output``): the action clipped to a
            Box's bounds, or what the env or a gym wrapper reports as
            ``info["executed_action"]`` (a safety layer, a scripted or human
            controller), sync and async alike. For algorithms that train on stored
            actions without their behaviour log-probabilities (SAC, DQN, DDPG, TD3, BC,
            IQL); refused for the actor-critic family (A2C, PPO, APPO, IMPALA).
        num_updates_per_train_iter: off-policy: passes (epochs over the whole buffer when
            ``whole_replay_buffer_training``, else sampled mini-batches) per iteration.
        mini_batch_size: sequences per mini-batch (None = the whole buffer in one batch).
        mini_batch_length: steps per sequence in a mini-batch (transition learners such as
            SAC/DQN sample ``n_step + 1`` steps; leave it at 1 for them).
        update_counter_every_mini_batch: write loss summaries every ``summary_interval``
            gradient steps (mini-batches) instead of every ``summary_interval`` iterations.
        whole_replay_buffer_training: train on everything in the buffer each iteration
            (PPO the ALF way). None = the algorithm's default.
        clear_replay_buffer: empty the buffer after each iteration. None = algorithm default.
        replay_buffer_length: capacity per env (None = the algorithm's need, e.g. unroll_length+1).
        priority_replay: prioritized sampling (Schaul et al. 2016) with priorities from
            ``LossInfo.priority``.
        priority_replay_alpha: priority exponent: items are sampled in proportion to
            ``(|p| + priority_replay_eps) ** priority_replay_alpha`` (0 = uniform).
        priority_replay_beta: importance-weight exponent (a float, or a schedule over
            training progress, e.g. ``@LinearSchedule(0.4, 1.0)`` anneals it to 1).
        priority_replay_eps: added to ``|p|`` so no item gets probability 0.
        offline_buffer_dir: dataset directory, or a list of them, for offline (with
            ``unroll_length=0``) or hybrid training (docs/offline.md). Datasets come from
            ``python -m alf.bin.export_dataset`` or a Minari import.
        offline_buffer_length: steps per row of the offline buffer (None: the dataset's;
            a shorter one keeps each row's newest steps).
        offline_buffer_check_values: before training, check every value of the datasets
            (finite floats, step types and episode boundaries, discounts, actions within
            the action spec); a bad one stops the run with one line naming file, field,
            row and step. It reads all the data once (about 0.06 s per million
            HalfCheetah-sized steps from the page cache); False skips it for datasets
            too big to read in full before training.
        offline_fraction: hybrid: share of every mini-batch drawn from the offline buffer
            (a float in [0, 1], or a schedule over training progress such as
            ``@LinearSchedule(0.5, 0.1)``); 0.5 is RLPD's symmetric sampling.
        rl_train_after_update_steps: hybrid: this many offline-only updates first, with no
            env stepped (an offline pre-training phase).
        rl_train_every_update_steps: hybrid: every this many updates draws a mixed batch;
            the others draw offline data only.
        learner_thread: train on a thread of its own while the main thread keeps
            collecting (RLlib's learner thread; docs/configuration.md "Learner thread"):
            collection of the next unroll overlaps training on the last one, at the cost
            of a policy lag (shown in the progress line) and of bit-identical reruns.
            Not for on-policy algorithms (A2C, REINFORCE).
        learner_queue_size: with ``learner_thread``: collected unrolls that may wait for
            the learner (the acting policy falls at most this + 1 training passes behind).
        learner_queue_timeout_s: with ``learner_thread``: the longest one collection may
            take while the learner waits for it (hung envs) before the run stops with an
            error naming the wait.
        num_checkpoints: keep this many newest checkpoints.
        checkpoint_interval: save every this many iterations (and at the end / on Ctrl-C).
        milestone_env_steps: also keep the checkpoint of the first iteration at or past
            every multiple of this many env steps, as
            ``train/milestones/ckpt-<iteration>-env_steps-<env steps>.pt``, never deleted
            by the ``num_checkpoints`` rotation (0 = off): the policy at 1M, 2M, ... env
            steps for later evaluation (``alf.bin.play --checkpoint=<iteration>``).
        milestone_seconds: the same every this many seconds of training (0 = off;
            Sample Factory's ``save_milestones_sec``).
        callbacks: objects whose ``on_iteration_end(algorithm, context, metrics)`` runs
            after every iteration, before its evaluation and checkpoint (in gin:
            ``[@MyCallback()]``; alf/trainers/callbacks.py): code of yours that changes
            the run as it goes, e.g. ``Agent.set_reward_weights``.
        evaluate: run a separate evaluation env every ``eval_interval`` iterations.
        eval_interval: iterations between evaluations.
        num_eval_episodes: episodes per evaluation (split fairly over eval envs).
        num_eval_environments: parallel envs used for evaluation.
        epsilon_greedy: evaluation: probability of a random action (0 = greedy).
        summary_interval: iterations between TensorBoard summaries.
        summarize_first_interval: also write summaries at iteration 1 and at the first
            iteration that trains (after random initial collection), losses included
            (the first gradient step with ``update_counter_every_mini_batch``).
        debug_summaries: extra (more expensive) summaries.
        progress_interval_seconds: seconds between console progress lines.
        num_threads: torch's intra-op thread count, fixed for the whole run (None: the
            CPUs this process starts with, i.e. its affinity mask capped by a cgroup CPU
            quota, or ``OMP_NUM_THREADS`` if set). Float results depend on it (torch
            splits reductions into one part per thread), so it is part of what a seed
            names; it never follows the load. Tiny networks are fastest with 1.
        adapt_threads: every second, let the run's threads run only on the CPUs other
            processes leave free (between 1 and ``num_threads`` CPUs), so that a run next
            to another CPU-bound process slows down by its fair share instead of
            fighting it for cores. It moves threads between CPUs and never changes their
            number, so results are bit for bit the same as with False (which keeps every
            CPU whatever the load; docs/design/thread_budget.md).
        metric_buffer_size: episodes averaged for AverageReturn / AverageEpisodeLength.
        save_replay_buffer: also checkpoint the replay buffer (a separate file).
        device: where the algorithm, its states and the replay buffer live ("cpu",
            "cuda", "cuda:1"); envs always step on the CPU. Under torchrun, "cuda" is
            each rank's own GPU, ``cuda:<LOCAL_RANK>``.
        train_precision: the precision the Learner's networks compute in: ``"fp32"`` (the
            default), ``"bf16"`` (``torch.autocast`` inside each network call; weights,
            gradients, optimizer state, returns, log-probabilities, normalisers and losses
            stay fp32) or ``"auto"`` (bf16 where the device has bf16 units: AMX-BF16 or
            AVX-512 BF16 on a CPU, a CUDA GPU that supports it; else fp32). The start of
            the run logs what was chosen. docs/design/mixed_precision.md.
        act_precision: the same for acting (rollout, evaluation, env and policy workers).
        check_finite: stop the run (one line, exit status 1) when a loss, gradient or
            updated parameter is NaN or infinite, or a parameter passes 2**64 in magnitude,
            or a checkpoint about to be saved holds a non-finite tensor (a buffer, e.g. a
            normaliser's statistics, or an optimizer state), naming the loss term or
            tensor, the iteration and the likely causes; the newest checkpoint before it
            is kept. Cheap (per update on the CPU: an isfinite of the loss and two
            ``_foreach_norm`` reductions, gradients and parameters, with three one-number
            reads; on CUDA no read per update, one per iteration;
            docs/design/finite_guard.md); False trains on regardless (checkpoints with
            non-finite tensors are still never written: a warning per skipped save).
        distributed_check_interval: data-parallel runs (torchrun): every this many
            iterations, compare every rank's parameters and buffers bit by bit with
            rank 0's (0 = never). See docs/distributed.md.
        distributed_drift: what a difference found by that check does: ``"resync"``
            (warn and copy rank 0's state to every rank) or ``"error"`` (stop the run).
        wandb_project: also log every TensorBoard scalar, and the gin config, to this
            Weights & Biases project (None: no W&B; needs ``pip install -e '.[wandb]'``;
            docs/configuration.md "Weights & Biases"). The W&B run is named after
            ``root_dir`` and resumed with it; a W&B failure is one warning line, the
            run goes on with TensorBoard only.
        wandb_entity: the W&B team or user that owns the project (None: your default).
        wandb_group: W&B group of the run (e.g. one per sweep; None: none).
        wandb_tags: W&B tags of the run, e.g. ``['ppo', 'baseline']``.
        wandb_mode: ``"online"``, ``"offline"`` (files under ``root_dir/wandb``, for
            ``wandb sync`` later) or ``"disabled"``; None: the ``WANDB_MODE`` env var,
            else online.
    """

    def __init__(self,
                 algorithm_ctor: Optional[Callable] = None,
                 data_transformer_ctor: Union[None, Callable, Sequence[Callable]] = None,
                 random_seed: Optional[NonNegativeInt] = None,
                 num_iterations: _CountOrNoLimit = 0,
                 num_env_steps: _CountOrNoLimit = 0,
                 stop_at_env_steps: _CountOrNoLimit = 0,
                 unroll_length: float = 8,
                 async_unroll: bool = False,
                 async_mode: str = "processes",
                 max_unroll_length: NonNegativeInt = 0,
                 unroll_queue_size: PositiveInt = 8,
                 unroll_parameter_update_period: PositiveInt = 10,
                 num_env_workers: PositiveInt = 1,
                 env_groups_per_worker: PositiveInt = 2,
                 env_worker_threads: PositiveInt = 1,
                 num_policy_workers: Optional[NonNegativeInt] = None,
                 max_policy_lag: Optional[NonNegativeInt] = None,
                 env_worker_timeout_s: Positive = 60.0,
                 max_env_worker_restarts: NonNegativeInt = 5,
                 initial_collect_steps: NonNegativeInt = 0,
                 overwrite_policy_output: bool = False,
                 num_updates_per_train_iter: PositiveInt = 4,
                 mini_batch_size: Optional[PositiveInt] = None,
                 mini_batch_length: PositiveInt = 1,
                 update_counter_every_mini_batch: bool = False,
                 whole_replay_buffer_training: Optional[bool] = None,
                 clear_replay_buffer: Optional[bool] = None,
                 replay_buffer_length: Optional[PositiveInt] = None,
                 priority_replay: bool = False,
                 priority_replay_alpha: UnitInterval = 0.7,
                 priority_replay_beta: UnitIntervalSchedule = 0.4,
                 priority_replay_eps: Positive = 1e-6,
                 offline_buffer_dir: Union[None, str, List[str]] = None,
                 offline_buffer_length: Optional[PositiveInt] = None,
                 offline_buffer_check_values: bool = True,
                 offline_fraction: UnitIntervalSchedule = 0.5,
                 rl_train_after_update_steps: NonNegativeInt = 0,
                 rl_train_every_update_steps: PositiveInt = 1,
                 learner_thread: bool = False,
                 learner_queue_size: PositiveInt = 2,
                 learner_queue_timeout_s: Positive = 600.0,
                 num_checkpoints: PositiveInt = 3,
                 checkpoint_interval: PositiveInt = 1000,
                 milestone_env_steps: _EveryOrOff = 0,
                 milestone_seconds: _SecondsOrOff = 0.0,
                 callbacks: Sequence[Any] = (),
                 evaluate: bool = False,
                 eval_interval: PositiveInt = 100,
                 num_eval_episodes: PositiveInt = 10,
                 num_eval_environments: PositiveInt = 1,
                 epsilon_greedy: Probability = 0.0,
                 summary_interval: PositiveInt = 50,
                 summarize_first_interval: bool = True,
                 debug_summaries: bool = False,
                 progress_interval_seconds: NonNegative = 5.0,
                 num_threads: Optional[PositiveInt] = None,
                 adapt_threads: bool = True,
                 metric_buffer_size: PositiveInt = 20,
                 save_replay_buffer: bool = False,
                 device: str = "cpu",
                 train_precision: str = "fp32",
                 act_precision: str = "fp32",
                 check_finite: bool = True,
                 distributed_check_interval: _CountOrNever = 100,
                 distributed_drift: str = "resync",
                 wandb_project: Optional[str] = None,
                 wandb_entity: Optional[str] = None,
                 wandb_group: Optional[str] = None,
                 wandb_tags: Sequence[str] = (),
                 wandb_mode: Optional[str] = None):
        self.algorithm_ctor = algorithm_ctor
        self.data_transformer_ctor = data_transformer_ctor
        self.random_seed = random_seed
        self.num_iterations = int(num_iterations)
        self.num_env_steps = int(num_env_steps)
        self.stop_at_env_steps = int(stop_at_env_steps)
        self.unroll_length = unroll_length
        self.async_unroll = bool(async_unroll)
        self.async_mode = async_mode
        self.max_unroll_length = int(max_unroll_length)
        self.unroll_queue_size = int(unroll_queue_size)
        self.unroll_parameter_update_period = int(unroll_parameter_update_period)
        self.num_env_workers = int(num_env_workers)
        self.env_groups_per_worker = int(env_groups_per_worker)
        self.env_worker_threads = int(env_worker_threads)
        self.num_policy_workers = None if num_policy_workers is None else int(num_policy_workers)
        self.max_policy_lag = max_policy_lag
        self.env_worker_timeout_s = float(env_worker_timeout_s)
        self.max_env_worker_restarts = int(max_env_worker_restarts)
        self.initial_collect_steps = int(initial_collect_steps)
        self.overwrite_policy_output = bool(overwrite_policy_output)
        self.num_updates_per_train_iter = int(num_updates_per_train_iter)
        self.mini_batch_size = mini_batch_size
        self.mini_batch_length = int(mini_batch_length)
        self.update_counter_every_mini_batch = bool(update_counter_every_mini_batch)
        self.whole_replay_buffer_training = whole_replay_buffer_training
        self.clear_replay_buffer = clear_replay_buffer
        self.replay_buffer_length = replay_buffer_length
        self.priority_replay = priority_replay
        self.priority_replay_alpha = priority_replay_alpha
        self.priority_replay_beta = priority_replay_beta
        self.priority_replay_eps = priority_replay_eps
        self.offline_buffer_dir = offline_buffer_dir
        self.offline_buffer_length = offline_buffer_length
        self.offline_buffer_check_values = bool(offline_buffer_check_values)
        self.offline_fraction = offline_fraction
        self.rl_train_after_update_steps = rl_train_after_update_steps
        self.rl_train_every_update_steps = rl_train_every_update_steps
        self.learner_thread = bool(learner_thread)
        self.learner_queue_size = int(learner_queue_size)
        self.learner_queue_timeout_s = float(learner_queue_timeout_s)
        self.num_checkpoints = int(num_checkpoints)
        self.checkpoint_interval = int(checkpoint_interval)
        self.milestone_env_steps = int(milestone_env_steps)
        self.milestone_seconds = float(milestone_seconds)
        self.callbacks = check_callbacks(callbacks)
        self.evaluate = evaluate
        self.eval_interval = int(eval_interval)
        self.num_eval_episodes = int(num_eval_episodes)
        self.num_eval_environments = int(num_eval_environments)
        self.epsilon_greedy = float(epsilon_greedy)
        self.summary_interval = int(summary_interval)
        self.summarize_first_interval = summarize_first_interval
        self.debug_summaries = debug_summaries
        self.progress_interval_seconds = float(progress_interval_seconds)
        self.num_threads = num_threads
        self.adapt_threads = bool(adapt_threads)
        self.distributed_check_interval = int(distributed_check_interval)
        self.distributed_drift = distributed_drift
        self.metric_buffer_size = int(metric_buffer_size)
        self.save_replay_buffer = save_replay_buffer
        self.device = device
        self.train_precision = train_precision
        self.act_precision = act_precision
        self.check_finite = bool(check_finite)
        self.wandb_project = wandb_project
        self.wandb_entity = wandb_entity
        self.wandb_group = wandb_group
        self.wandb_tags = list(wandb_tags or ())
        self.wandb_mode = wandb_mode
        self.validate()

    def validate(self) -> None:
        """Fail at construction, with the field named, on impossible combinations.

        Single values outside their declared range (``num_iterations: >= 0``) are refused
        first, in the form the gin check uses (they may come from Python, not gin)."""
        check_ranges("TrainerConfig", TrainerConfig.__init__, vars(self))
        if self.learner_thread and self.async_unroll and self.async_mode == "deterministic":
            raise ConfigError("TrainerConfig.learner_thread=True with async_mode='deterministic': "
                              "a learner thread trains beside the acting thread, so runs are "
                              "not bit-identical; use one or the other")
        if self.algorithm_ctor is None:
            raise ConfigError("TrainerConfig.algorithm_ctor is not set: bind it in the gin file, "
                              "e.g. `TrainerConfig.algorithm_ctor = @PPOAlgorithm`")
        if self.num_iterations <= 0 and self.num_env_steps <= 0:
            raise ConfigError("Set TrainerConfig.num_iterations or TrainerConfig.num_env_steps "
                              "(both are 0, so training would never stop)")
        if self.num_policy_workers and not self.async_unroll:  # None, 0: a sync run's way
            raise ConfigError(
                f"TrainerConfig.num_policy_workers={self.num_policy_workers} needs "
                "async_unroll=True (policy workers act for env worker processes; a sync run "
                "acts in its own process): set TrainerConfig.async_unroll=True, or "
                "TrainerConfig.num_policy_workers=None")
        if self.async_unroll:
            self._validate_async()
        elif not (self.unroll_length > 0) and not self.offline_only:  # 0: pure offline
            hint = (" (0 means pure offline training, which needs "
                    "TrainerConfig.offline_buffer_dir)" if self.unroll_length == 0 else "")
            raise ConfigError(f"TrainerConfig.unroll_length must be > 0, got "
                              f"{self.unroll_length}{hint}")
        if self.unroll_length >= 1 and float(self.unroll_length) != int(self.unroll_length):
            raise ConfigError("TrainerConfig.unroll_length above 1 must be an integer, got "
                              f"{self.unroll_length}")
        if self.distributed_drift not in ("resync", "error"):
            raise ConfigError("TrainerConfig.distributed_drift must be 'resync' or 'error', got "
                              f"{self.distributed_drift!r}")
        try:
            dev = torch.device(self.device)
        except (RuntimeError, TypeError) as e:
            raise ConfigError(f"TrainerConfig.device='{self.device}' is not a device: {e}") from None
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ConfigError(f"TrainerConfig.device='{self.device}' but CUDA is not available "
                              "on this machine; use 'cpu'")
        for name in ("train_precision", "act_precision"):
            precision.resolve(name, getattr(self, name), self.device)  # refuses unknown values
        self._validate_offline()
        check_wandb_config(self.wandb_project, self.wandb_mode)

    @property
    def offline_only(self) -> bool:
        """Pure offline training: datasets and no training env (``unroll_length == 0``)."""
        return bool(self.offline_buffer_dir) and not self.async_unroll and self.unroll_length == 0

    def _validate_offline(self) -> None:
        if not self.offline_buffer_dir:
            return
        paths = ([self.offline_buffer_dir] if isinstance(self.offline_buffer_dir, str)
                 else list(self.offline_buffer_dir))
        if not all(isinstance(p, str) and p for p in paths):
            raise ConfigError("TrainerConfig.offline_buffer_dir must be a dataset path or a list "
                              f"of them, got {self.offline_buffer_dir!r}")
        if self.async_unroll and self.unroll_length == 0:
            raise ConfigError("TrainerConfig.offline_buffer_dir with async_unroll=True and "
                              "unroll_length=0: pure offline training steps no env, so it needs "
                              "no async unroller; set async_unroll=False (pure offline) or "
                              "unroll_length > 0 (hybrid)")
        if self.offline_only and self.num_env_steps > 0:
            raise ConfigError("TrainerConfig.num_env_steps cannot end pure offline training "
                              "(unroll_length=0 steps no env): set TrainerConfig.num_env_steps=0 "
                              "and TrainerConfig.num_iterations")
        if self.offline_only and self.milestone_env_steps > 0:
            raise ConfigError("TrainerConfig.milestone_env_steps is never reached in pure "
                              "offline training (unroll_length=0 steps no env): use "
                              "TrainerConfig.milestone_seconds, or set milestone_env_steps=0")

    def _validate_async(self) -> None:
        modes = ("processes", "deterministic", "serial")
        if self.async_mode not in modes:
            raise ConfigError(f"TrainerConfig.async_mode must be one of {', '.join(modes)}, "
                              f"got {self.async_mode!r}")
        if self.unroll_length < 0 or float(self.unroll_length) != int(self.unroll_length):
            raise ConfigError("TrainerConfig.unroll_length must be a whole number of steps with "
                              f"async_unroll=True (0: use max_unroll_length), got {self.unroll_length}")
        if self.unroll_length == 0 and self.max_unroll_length < 1:
            raise ConfigError("TrainerConfig.unroll_length=0 (async: train on whatever is ready) "
                              "needs TrainerConfig.max_unroll_length >= 1, the trajectory length")
        if (self.num_policy_workers is not None
                and self.num_policy_workers > self.num_env_workers):
            raise ConfigError(
                f"TrainerConfig.num_policy_workers={self.num_policy_workers} is more than "
                f"num_env_workers={self.num_env_workers}: each policy worker serves whole env "
                "workers, so the extra ones would have nothing to do. Use at most "
                f"{self.num_env_workers}, or more env workers")
        if self.max_policy_lag is not None:
            if self.async_mode == "deterministic":
                raise ConfigError("TrainerConfig.max_policy_lag does not apply to "
                                  "async_mode='deterministic' (its lag is exactly 1): unset it")
            if int(self.max_policy_lag) < self.unroll_parameter_update_period - 1:
                raise ConfigError(
                    f"TrainerConfig.max_policy_lag={self.max_policy_lag} is below "
                    f"unroll_parameter_update_period - 1 ({self.unroll_parameter_update_period}"
                    " - 1): weights reach the env workers only every "
                    f"{self.unroll_parameter_update_period} iterations, so every trajectory "
                    "would be dropped. Raise max_policy_lag or lower the period")
