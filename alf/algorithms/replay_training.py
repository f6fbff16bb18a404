"""Training on stored experience: mini-batch iteration (the Learner's) and one gradient
step per batch (``RLAlgorithm.train_on_batch``'s default).

Shapes: replay data is batch-major ``[B, L]``; ``train_step`` is called per
time step on ``[B]``; ``calc_loss`` receives time-major ``[L, B]`` infos.
Stateless algorithms with ``L == 1`` get one ``train_step`` over the whole
flattened batch (no Python loop over time).
"""
from typing import Any, Iterator, Optional, Tuple

import torch

from alf import nest as alf_nest
from alf.data_structures import Experience, LossInfo
from alf.utils.tensor_utils import reset_state_if_necessary, split_leading_dim, transpose2


def whole_buffer_mini_batches(experience: Experience, mini_batch_size: Optional[int],
                              mini_batch_length: int, num_epochs: int = 1,
                              generator: Optional[torch.Generator] = None) -> Iterator[Experience]:
    """Shuffle a whole-buffer ``[B, T]`` experience into ``[mini_batch_size, L]`` batches.

    Each env's ``T`` steps are cut into ``T // L`` consecutive segments (a tail
    shorter than ``L`` is dropped); for each of ``num_epochs`` epochs the
    segments are reshuffled across envs and grouped into mini-batches (the last
    one may be smaller). The segmenting is done once; an epoch costs one
    ``randperm`` plus one gather per field and mini-batch.
    """
    B, T = alf_nest.flatten(experience)[0].shape[:2]
    L = mini_batch_length
    n_seg = T // L
    if n_seg == 0:
        raise ValueError(f"mini_batch_length {L} exceeds the {T} steps in the buffer")
    segs = alf_nest.map_structure(
        lambda x: x[:, :n_seg * L].reshape((B * n_seg, L) + tuple(x.shape[2:])), experience)
    total = B * n_seg
    size = total if mini_batch_size is None else int(mini_batch_size)
    device = alf_nest.flatten(experience)[0].device
    for _ in range(num_epochs):
        perm = torch.randperm(total, generator=generator).to(device)
        for start in range(0, total, size):
            idx = perm[start:start + size]
            yield alf_nest.map_structure(lambda x: x[idx], segs)


def preprocess_sampled(algorithm: Any, experience: Experience) -> Experience:
    """``algorithm.preprocess_experience`` on a sampled ``[B, L]`` batch, after the data
    transformer's ``transform_experience`` (replay-side transforms such as hindsight
    relabeling, which read the buffer named by ``batch_info``).

    Its hook maps ``[B, L]`` fields (e.g. PPO's ``x[:, :-1]``); the per-sequence
    ``batch_info`` (``[B]`` tensors and the buffer object) would break such a map, so it is
    taken out for the call and attached to the result (rows are not reordered by
    preprocessing; steps may be dropped).
    """
    info = experience.batch_info
    if alf_nest.is_empty(info):
        return algorithm.preprocess_experience(experience)
    transform = getattr(getattr(algorithm, "data_transformer", None), "transform_experience",
                        None)
    if transform is not None:
        experience = transform(experience)
    out = algorithm.preprocess_experience(experience._replace(batch_info=()))
    return out._replace(batch_info=info) if alf_nest.is_empty(out.batch_info) else out


def train_on_batch(algorithm, experience: Experience) -> Tuple[LossInfo, Any]:
    """One gradient step of ``algorithm`` on ``experience`` ``[B, L]``.

    ``train_step`` is called with the state it needs: ``get_initial_train_state(B)``
    for a stateless algorithm; for a stateful one (an RNN) each sequence starts from its
    stored rollout state ``experience.state[:, 0]`` and restarts from
    ``get_initial_train_state(B)`` where an episode begins. Importance weights
    (``batch_info``) scale a per-sample ``[L, B]`` loss.

    Returns the (detached-loss) :class:`LossInfo` and the time-major train info ``[L, B]``.
    """
    first = alf_nest.flatten(experience.time_step.step_type)[0]
    B, L = first.shape[:2]
    # batch_info is per sequence ([B] tensors and the buffer object): kept out of the [B, L] maps
    stateless = alf_nest.is_empty(algorithm.train_state_spec)
    if stateless and L == 1:  # the common case: no transpose needed
        flat = alf_nest.map_structure(lambda x: x[:, 0], experience._replace(batch_info=()))
        alg_step = algorithm.train_step(flat, algorithm.get_initial_train_state(B),
                                        flat.rollout_info)
        info = alf_nest.map_structure(lambda x: x.unsqueeze(0), alg_step.info)
    elif stateless:
        exp_t = transpose2(experience._replace(batch_info=()))  # [L, B]
        flat = alf_nest.map_structure(lambda x: x.reshape((L * B,) + tuple(x.shape[2:])), exp_t)
        alg_step = algorithm.train_step(flat, algorithm.get_initial_train_state(L * B),
                                        flat.rollout_info)
        info = split_leading_dim(alg_step.info, (L, B))
    else:
        exp_t = transpose2(experience._replace(batch_info=()))  # [L, B]
        state = alf_nest.map_structure(lambda s: s[0], exp_t.state)
        init = algorithm.get_initial_train_state(B)
        infos = []
        for t in range(L):
            step = alf_nest.map_structure(lambda x: x[t], exp_t)
            state = reset_state_if_necessary(state, init, step.time_step.is_first())
            alg_step = algorithm.train_step(step, state, step.rollout_info)
            state = alg_step.state
            infos.append(alg_step.info)
        info = alf_nest.stack(infos)
    loss_info = algorithm.calc_loss(info)
    weights = experience.batch_info.importance_weights if not alf_nest.is_empty(
        experience.batch_info) else ()
    if isinstance(weights, torch.Tensor) and isinstance(loss_info.loss, torch.Tensor) \
            and loss_info.loss.ndim == 2:
        loss_info = loss_info._replace(loss=loss_info.loss * weights[None, :])
    loss_info = algorithm.update_with_gradient(loss_info)
    algorithm.after_update(experience, info)
    return loss_info, info
