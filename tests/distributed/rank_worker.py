"""One rank of a data-parallel test run, started by :mod:`tests.distributed.ranks`
the way torchrun starts ranks (``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_*``
in the environment), so it joins through :meth:`RankGroup.from_environment`.

    python rank_worker.py CONF.gin ROOT_DIR OUT.pt [--inspect_restore] [gin bindings...]

Builds a Trainer for ``CONF.gin`` in ``ROOT_DIR`` and runs it; then writes what the
test compares to ``OUT.pt`` (a test artefact, not an alf file): the algorithm's
tensors, the run counters, this rank's torch RNG state and replay buffer, and with
``--inspect_restore`` the same right after restoring the checkpoint.
"""
import sys

import torch


def snapshot(trainer) -> dict:
    alg = trainer.algorithm
    rb = trainer.learner.replay_buffer
    return {
        "state": {k: v.detach().clone() for k, v in alg.state_dict().items()
                  if isinstance(v, torch.Tensor)},
        "optimizers": [o.state_dict() for o in alg.optimizers()],
        "context": trainer.context.state_dict(),
        "rng": torch.get_rng_state(),
        "replay_buffer": rb.state_dict() if rb is not None else None,
        "episodes": trainer.unroller.metrics.num_episodes,
    }


def main(argv) -> int:
    conf, root_dir, out = argv[1:4]
    rest = argv[4:]
    inspect = "--inspect_restore" in rest
    params = [a for a in rest if a != "--inspect_restore"]
    from alf import config as alf_config
    from alf.distributed import RankGroup
    from alf.trainers.trainer import Trainer
    from alf.trainers.trainer_config import TrainerConfig

    group = RankGroup.from_environment()
    alf_config.parse_config(conf_file=conf, conf_params=params)
    trainer = Trainer(TrainerConfig(), root_dir, config_text=alf_config.config_text(),
                      quiet=True, rank_group=group)
    result = {"rank": group.rank}
    if inspect:
        assert trainer.restore_checkpoint()
        result["restored"] = snapshot(trainer)
    trainer.run()
    result.update(snapshot(trainer))
    torch.save(result, out)
    group.close(completed=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
