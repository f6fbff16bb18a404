"""alf: a configurable reinforcement-learning research toolkit (ALF-style, PyTorch + gin)."""
from setuptools import find_packages, setup

setup(
    name="alf",
    version="0.1.0",
    description="Agent Learning Framework style RL toolkit: RLAlgorithm hooks, gin configs, "
                "replay buffers, sync/async unrollers and a Trainer",
    long_description=open("README.md").read() if __import__("os").path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    packages=find_packages(include=["alf", "alf.*"]),
    package_data={"alf": ["examples/*.gin"]},
    include_package_data=True,
    install_requires=[
        # CPU machines: install the local wheel first with `pip install torch==2.13.0`;
        # a range it satisfies installs nothing more.
        "torch>=2.1",
        "gin-config>=0.5",
        "absl-py>=1.0",
        "numpy>=1.23",
        "gymnasium[classic-control]>=1.0",
        "tensorboard>=2.10",
        # TensorBoard's own CRC-32C is pure Python (alf/trainers/event_file_speed.py)
        "google-crc32c>=1.5",
        "optree>=0.10",
    ],
    # which extras each command needs (and the hint a missing one prints): alf/bin/extras.py;
    # tests/test_declared_imports.py checks every import of alf/ against both
    extras_require={
        "test": ["pytest>=7", "pytest-timeout>=2",
                 # the suite runs one test file per CPU (README command (b): -n auto)
                 "pytest-xdist>=3", "gymnasium[mujoco]>=1.0", "ale-py>=0.9",
                 "opencv-python-headless>=4", "imageio>=2.30", "imageio-ffmpeg>=0.4",
                 "minigrid>=2.3",
                 # Minari's DataCollector (tests record datasets with it) needs jax: [create]
                 "minari[create,hdf5]>=0.5.4,<0.6",
                 # lint-imports checks the layers (.importlinter, docs/design/layers.md);
                 # 2.7 is the first with the acyclic_siblings contract
                 "import-linter>=2.7,<3",
                 # alf.bin.sweep / alf.bin.pbt (study storage, samplers, pruners), alf.bin.compare
                 # (statistics, plots), W&B mirroring tested offline
                 "optuna>=4.2", "scipy>=1.9", "matplotlib>=3.5", "wandb>=0.17",
                 # sweeps and PBT on a real PostgreSQL server (tests/studies/test_postgres_storage.py)
                 "psycopg[binary]>=3.1", "sqlalchemy>=2.1"],
        "mujoco": ["gymnasium[mujoco]>=1.0"],
        "atari": ["ale-py>=0.9", "opencv-python-headless>=4"],
        "envpool": ["envpool>=0.8"],
        # MiniGrid / BabyAI ids (MiniGridObservationWrapper; the exploration benchmark)
        "minigrid": ["minigrid>=2.3"],
        # Minari import/export; packaging reads Minari's version
        "offline": ["minari[hdf5]>=0.5.4,<0.6", "packaging>=21"],
        # gymnasium-robotics' Fetch tasks (sac_her_fetch_reach.gin): its 1.4.2 fails with
        # mujoco >= 3.12, which gymnasium[mujoco] (the [mujoco]/[test] extras, the locomotion
        # examples) installs, so this extra goes in a venv of its own (docs/hindsight_goals.md)
        "robotics": ["gymnasium-robotics==1.4.2", "mujoco>=3.3.7,<3.11"],
        "video": ["imageio>=2.30", "imageio-ffmpeg>=0.4"],
        "plot": ["matplotlib>=3.5"],
        # alf.bin.sweep, alf.bin.pbt (Optuna's samplers, pruners and storages; lineage plots)
        # and alf.bin.compare (scipy: the IQM; matplotlib: plots)
        # (sqlalchemy: Optuna's database layer, which alf asks which driver a --storage URL needs)
        "sweep": ["optuna>=4.2", "scipy>=1.9", "matplotlib>=3.5", "sqlalchemy>=2.0"],
        # --storage=postgresql://...: SQLAlchemy >= 2.1 opens postgresql:// with psycopg (v3)
        "postgres": ["psycopg[binary]>=3.1", "sqlalchemy>=2.1"],
        "wandb": ["wandb>=0.17"],
        "bench": ["stable-baselines3>=2.3", "matplotlib>=3.5", "optuna>=4.2",
                  # rliable: reference IQM / bootstrap intervals the compare tool is checked against
                  "rliable>=1.0"],
    },
    entry_points={"console_scripts": ["alf-train=alf.bin.train:console_main", "alf-play=alf.bin.play:main",
                                      "alf-export-dataset=alf.bin.export_dataset:main",
                                      "alf-minari=alf.bin.minari_dataset:main",
                                      "alf-sweep=alf.bin.sweep:main", "alf-pbt=alf.bin.pbt:main",
                                      "alf-compare=alf.bin.compare:main"]},
)
