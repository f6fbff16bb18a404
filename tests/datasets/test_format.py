"""alf's dataset format: exact round trips, streaming == batch writing, memory mapping, and
one-line errors for every damaged-file case."""
import json
import re
import os

import numpy as np
import pytest
import torch

from alf.data_structures import StepType
from alf.datasets import (DatasetError, DatasetSteps, DatasetWriter, open_dataset,
                          write_dataset)
from alf.datasets.format import MANIFEST, compute_episodes
from alf.datasets.spec_json import spec_from_json, spec_to_json
from alf.errors import UserError
from alf.tensor_specs import BoundedTensorSpec, TensorSpec

OBS = {"pos": TensorSpec((3,)),
       "cam": {"rgb": BoundedTensorSpec((2, 2, 3), torch.uint8, 0, 255)},
       "flag": TensorSpec((), torch.bool)}
ACT = BoundedTensorSpec((2,), torch.float32, [-1.0, -2.0], [1.0, 2.0])
REW = TensorSpec(())
F, M, L = StepType.FIRST, StepType.MID, StepType.LAST

# row 0: complete episode (0..3), then an episode cut at the row's end (4..6)
# row 1: starts mid-episode (0..1), complete episode (2..4); valid length 5 of 7
STEP_TYPE = np.array([[F, M, M, L, F, M, M], [M, L, F, M, L, 0, 0]], dtype=np.int32)
LENGTHS = [7, 5]


def make_steps(seed=0, obs_spec=OBS, step_type=STEP_TYPE, lengths=LENGTHS):
    """Random [R, T, ...] steps with the given step types; rewards 0 at FIRST, padding zero."""
    g = np.random.default_rng(seed)
    R, T = step_type.shape
    valid = np.arange(T)[None] < np.asarray(lengths)[:, None]

    def rand(spec):
        shape = (R, T) + tuple(spec.shape)
        if spec.dtype == torch.bool:
            x = g.random(shape) > 0.5
        elif spec.dtype == torch.uint8:
            x = g.integers(0, 256, shape, dtype=np.uint8)
        else:
            x = g.standard_normal(shape).astype(np.float32)
        return torch.from_numpy(np.where(valid.reshape(valid.shape + (1,) * (x.ndim - 2)), x,
                                         np.zeros_like(x)))

    from alf import nest
    reward = rand(REW) * torch.from_numpy(step_type != F)
    return DatasetSteps(step_type=torch.from_numpy(step_type.copy()), reward=reward,
                        discount=torch.from_numpy(np.where(step_type == L, 0.0, 1.0)
                                                  .astype(np.float32) * valid),
                        observation=nest.map_structure(rand, obs_spec), action=rand(ACT))


def expected_action(steps):
    a = steps.action.clone()
    a[steps.step_type == L] = 0
    return a


def test_spec_json_round_trip():
    specs = {"o": OBS, "a": ACT, "t": (TensorSpec((4,), torch.int64),
                                      BoundedTensorSpec((), torch.int64, 0, 5)),
             "inf": BoundedTensorSpec((2,), torch.float32, -np.inf, np.inf),
             "odd": BoundedTensorSpec((3,), torch.float32, [-0.1, 0.2, 1e-7], 1.5)}
    text = json.dumps(spec_to_json(specs))
    back = spec_from_json(json.loads(text))
    assert back == specs
    assert spec_to_json(ACT) == {"shape": [2], "dtype": "float32", "minimum": [-1.0, -2.0],
                                 "maximum": [1.0, 2.0]}
    # a dict nest whose keys look like a leaf's is still a nest
    weird = {"shape": TensorSpec((1,)), "dtype": TensorSpec((2,))}
    assert spec_from_json(json.loads(json.dumps(spec_to_json(weird)))) == weird


def test_write_open_round_trip_is_exact(tmp_path):
    steps = make_steps()
    path = str(tmp_path / "ds")
    info = write_dataset(path, steps, LENGTHS, "Toy-v0", OBS, ACT, REW,
                         data_transformers=[{"class": "ObservationNormalizer"}], frame_stack=4,
                         source={"kind": "test"})
    ds = open_dataset(path)
    for name, want, got in [("step_type", steps.step_type, ds.steps.step_type),
                            ("reward", steps.reward, ds.steps.reward),
                            ("discount", steps.discount, ds.steps.discount),
                            ("action", expected_action(steps), ds.steps.action),
                            ("pos", steps.observation["pos"], ds.steps.observation["pos"]),
                            ("rgb", steps.observation["cam"]["rgb"],
                             ds.steps.observation["cam"]["rgb"]),
                            ("flag", steps.observation["flag"], ds.steps.observation["flag"])]:
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert np.array_equal(got.numpy().view(np.uint8), want.numpy().view(np.uint8)), name
    assert ds.info.observation_spec == OBS and ds.info.action_spec == ACT
    assert ds.info.reward_spec == REW
    assert (ds.info.num_rows, ds.info.row_length, ds.info.row_lengths) == (2, 7, LENGTHS)
    assert ds.info.num_steps == 12 and ds.info.num_episodes == 2
    assert ds.info.frame_stack == 4 and ds.info.source == {"kind": "test"}
    assert ds.info.data_transformers == [{"class": "ObservationNormalizer"}]
    assert ds.info.env_name == "Toy-v0" and info.num_episodes == 2
    assert ds.episodes().tolist() == [[0, 0, 4, 1], [0, 4, 3, 0], [1, 0, 2, 0], [1, 2, 3, 1]]
    r = steps.reward.double().numpy()
    np.testing.assert_allclose(ds.episode_returns(),
                               [r[0, 1:4].sum(), r[0, 5:7].sum(), r[1, 1], r[1, 3:5].sum()])
    assert sorted(os.listdir(path)) == sorted(
        [MANIFEST, "episodes.npy", "episode_returns.npy", "step_type.npy", "reward.npy",
         "discount.npy", "observation.pos.npy", "observation.cam.rgb.npy",
         "observation.flag.npy", "action.npy"])
    # plain .npy files anyone can read without alf (and without pickle)
    rgb = np.load(os.path.join(path, "observation.cam.rgb.npy"), allow_pickle=False)
    assert rgb.shape == (2, 7, 2, 2, 3) and rgb.dtype == np.uint8
    # in-RAM loading gives the same values
    ram = open_dataset(path, mmap=False)
    assert torch.equal(ram.steps.observation["pos"], ds.steps.observation["pos"])
    assert not isinstance(ram.steps.observation["pos"].numpy(), np.memmap)


def test_padding_and_last_actions_are_zeroed(tmp_path):
    steps = make_steps()
    steps.action.fill_(7.0)
    steps.observation["pos"][1, 5:] = 3.0  # garbage in the padding
    write_dataset(str(tmp_path / "ds"), steps, LENGTHS, "Toy-v0", OBS, ACT, REW)
    ds = open_dataset(str(tmp_path / "ds"))
    last = ds.steps.step_type == L
    assert torch.all(ds.steps.action[last] == 0)
    valid = torch.arange(7)[None] < torch.tensor(LENGTHS)[:, None]
    assert torch.all(ds.steps.action[~last & valid] == 7.0)
    assert int((~last & valid).sum()) == 9
    assert torch.all(ds.steps.observation["pos"][1, 5:] == 0)
    assert torch.all(ds.steps.action[1, 5:] == 0)
    assert torch.all(steps.action == 7.0)  # the caller's tensors are not modified


def test_streaming_writer_equals_write_dataset(tmp_path):
    steps = make_steps(seed=3)
    write_dataset(str(tmp_path / "batch"), steps, LENGTHS, "Toy-v0", OBS, ACT, REW)
    from alf import nest
    tm = nest.map_structure(lambda x: x.transpose(0, 1), steps)  # [T, R, ...]
    with DatasetWriter(str(tmp_path / "stream"), 2, 7, "Toy-v0", OBS, ACT, REW) as w:
        w.append(nest.map_structure(lambda x: x[:2], tm))  # both rows, t = 0..1
        w.append(nest.map_structure(lambda x: x[2:3, 1:], tm), rows=[1])  # row 1 only
        w.append(nest.map_structure(lambda x: x[2:5, :1], tm), rows=[0])  # row 0 catches up
        w.append(nest.map_structure(lambda x: x[3:5, 1:], tm), rows=[1])  # row 1 done (5)
        w.append(nest.map_structure(lambda x: x[5:7, :1], tm), rows=[0])
        info = w.close()
    assert info.row_lengths == LENGTHS
    assert not os.path.exists(w.tmp_path)
    a, b = tmp_path / "batch", tmp_path / "stream"
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b))
    for name in names:
        if name != MANIFEST:
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    ma, mb = (json.loads((p / MANIFEST).read_text()) for p in (a, b))
    ma.pop("created"), mb.pop("created")
    assert ma == mb


def test_writer_stages_in_tmp_dir_and_aborts_on_error(tmp_path):
    path = str(tmp_path / "ds")
    steps = make_steps()
    from alf import nest
    with pytest.raises(RuntimeError, match="boom"):
        with DatasetWriter(path, 2, 7, "Toy-v0", OBS, ACT, REW) as w:
            w.append(nest.map_structure(lambda x: x.transpose(0, 1)[:3], steps))
            assert os.path.isdir(f"{path}.tmp-{os.getpid()}")
            assert not os.path.exists(path)  # an unfinished collection is not a dataset
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []


def test_refuses_to_overwrite_unless_asked(tmp_path):
    path = str(tmp_path / "ds")
    write_dataset(path, make_steps(0), LENGTHS, "Toy-v0", OBS, ACT, REW)
    with pytest.raises(DatasetError, match=r"ds already exists; .*--overwrite") as e:
        write_dataset(path, make_steps(1), LENGTHS, "Toy-v0", OBS, ACT, REW)
    assert "\n" not in str(e.value)
    write_dataset(path, make_steps(1), LENGTHS, "Other-v0", OBS, ACT, REW, overwrite=True)
    assert open_dataset(path).info.env_name == "Other-v0"
    assert sorted(os.listdir(tmp_path)) == ["ds"]
    other = tmp_path / "notes"
    other.mkdir()
    (other / "x.txt").write_text("keep me")
    with pytest.raises(DatasetError, match="is not an alf dataset; refusing to replace it"):
        write_dataset(str(other), make_steps(1), LENGTHS, "Toy-v0", OBS, ACT, REW, overwrite=True)
    assert (other / "x.txt").read_text() == "keep me"


def test_mmap_shares_memory_with_a_copy_on_write_map(tmp_path):
    path = str(tmp_path / "ds")
    steps = make_steps()
    write_dataset(path, steps, LENGTHS, "Toy-v0", OBS, ACT, REW)
    ds = open_dataset(path)
    pos = ds.steps.observation["pos"]
    file = os.path.join(path, "observation.pos.npy")
    assert _mapped_file(pos.data_ptr()) == file  # the tensor's memory IS the file's map
    assert _mapped_file(ds.steps.observation["cam"]["rgb"].data_ptr()).endswith(
        "observation.cam.rgb.npy")
    assert _mapped_file(open_dataset(path, mmap=False).steps.reward.data_ptr()) is None
    # copy-on-write: writing to the tensor changes neither the file nor a fresh open
    pos[0, 0, 0] = 1234.5
    assert open_dataset(path).steps.observation["pos"][0, 0, 0] != 1234.5
    on_disk = np.load(os.path.join(path, "observation.pos.npy"), allow_pickle=False)
    assert on_disk[0, 0, 0] == steps.observation["pos"][0, 0, 0].item()


def _mapped_file(address):
    """The file mapped at ``address`` in this process (Linux /proc/self/maps), else None."""
    if not os.path.exists("/proc/self/maps"):
        pytest.skip("needs /proc/self/maps")
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= address < hi:
                name = parts[5] if len(parts) > 5 else None
                return name if name and name.startswith("/") else None
    return None


def _corrupt_json(path):
    with open(os.path.join(path, MANIFEST), "r+") as f:
        text = f.read()
        f.seek(0)
        f.truncate()
        f.write(text[:len(text) // 2])


def _manifest(path):
    with open(os.path.join(path, MANIFEST)) as f:
        return json.load(f)


def _set_manifest(path, **changes):
    m = json.loads(open(os.path.join(path, MANIFEST)).read())
    m.update(changes)
    with open(os.path.join(path, MANIFEST), "w") as f:
        json.dump(m, f)


def _truncate(path, name, nbytes):
    file = os.path.join(path, name)
    with open(file, "r+b") as f:
        f.truncate(os.path.getsize(file) - nbytes)


@pytest.mark.parametrize("damage, pattern", [
    (lambda p: _truncate(p, "observation.pos.npy", 4),
     r"dataset file .*ds/observation\.pos\.npy \(field 'observation\.pos'\) is truncated or "
     r"damaged: 292 bytes, expected 296 "
     r"\(observation\.pos\.npy header \+ \[2, 7, 3\] float32\); re-export the dataset$"),
    (lambda p: _truncate(p, "action.npy", os.path.getsize(os.path.join(p, "action.npy")) - 20),
     r"ds/action\.npy \(field 'action'\) is truncated or damaged: bad \.npy header"),
    (lambda p: _truncate(p, "episodes.npy", 8),
     r"ds/episodes\.npy \(episode table\) is truncated or damaged"),
    (lambda p: os.remove(os.path.join(p, "reward.npy")),
     r"dataset file .*ds/reward\.npy \(field 'reward'\) is missing; re-export the dataset"),
    (lambda p: np.save(os.path.join(p, "discount.npy"), np.zeros((2, 7), np.float64)),
     r"ds/discount\.npy \(field 'discount'\) is truncated or damaged: it holds "
     r"float64\[2, 7\], the manifest says float32\[2, 7\]"),
    (lambda p: np.save(os.path.join(p, "discount.npy"), np.array([[None]] * 2, dtype=object)),
     r"ds/discount\.npy \(field 'discount'\) is truncated or damaged: header declares Python "
     r"objects"),
    (_corrupt_json, r"ds/alf_dataset\.json is damaged: bad JSON \(.* at line \d+ column \d+\)"),
    (lambda p: _set_manifest(p, format_version=2),
     r"ds/alf_dataset\.json has dataset format version 2, newer than this alf reads \(up to 1\)"
     r": upgrade alf"),
    (lambda p: _set_manifest(p, format="something-else"),
     r"ds/alf_dataset\.json is not an alf dataset manifest \(format 'something-else'"),
    (lambda p: _set_manifest(p, num_steps=13),
     r"ds/alf_dataset\.json is damaged: num_steps 13 is not the sum of row_lengths \(12\)"),
    (lambda p: _set_manifest(p, fields={}),
     r"ds/alf_dataset\.json is damaged: field 'step_type' is missing"),
    (lambda p: _set_manifest(p, action_spec={"shape": [2], "dtype": "float33"}),
     r"ds/alf_dataset\.json is damaged: action_spec: spec <root> has a bad shape/dtype"),
    (lambda p: _set_manifest(p, action_spec={"shape": [3], "dtype": "float32"}),
     r"ds/alf_dataset\.json is damaged: field 'action' is listed as float32\[2, 7, 2\] but its "
     r"spec and counts give float32\[2, 7, 3\]"),
    (lambda p: _set_manifest(p, fields=dict(_manifest(p)["fields"], action=dict(
        _manifest(p)["fields"]["action"], dtype="no-such-type"))),
     r"ds/alf_dataset\.json is damaged: field 'action' is listed as no-such-type\[2, 7, 2\]"),
    (lambda p: _set_manifest(p, frame_stack="four"),
     r"ds/alf_dataset\.json is damaged: frame_stack, source or data_transformers has the "
     r"wrong type"),
    (lambda p: np.save(os.path.join(p, "episodes.npy"),
                       np.array([[0, 0, 4, 1], [0, 4, 3, 0], [1, 0, 2, 0], [1, 2, 9, 1]])),
     r"ds/episodes\.npy \(episode table\) is damaged: an episode lies outside the rows"),
    (lambda p: os.remove(os.path.join(p, MANIFEST)),
     r"ds is not an alf dataset \(a directory without alf_dataset\.json\); make one with "
     r"`python -m alf\.bin\.export_dataset"),
])
def test_damaged_dataset_errors_are_one_line(tmp_path, damage, pattern):
    path = str(tmp_path / "ds")
    write_dataset(path, make_steps(), LENGTHS, "Toy-v0", OBS, ACT, REW)
    damage(path)
    with pytest.raises(DatasetError) as e:
        open_dataset(path)
    assert isinstance(e.value, UserError)
    message = str(e.value)
    assert "\n" not in message
    assert re.search(pattern, message), message


def test_missing_path_and_plain_file(tmp_path):
    with pytest.raises(DatasetError, match=r"dataset .*nowhere does not exist; make one with"):
        open_dataset(str(tmp_path / "nowhere"))
    (tmp_path / "f.npz").write_bytes(b"PK")
    with pytest.raises(DatasetError, match=r"f\.npz is not an alf dataset \(a file\)"):
        open_dataset(str(tmp_path / "f.npz"))


def test_compute_episodes_handles_vector_rewards_and_empty_rows():
    st = np.array([[F, M, L, F], [0, 0, 0, 0]], np.int32)
    rw = np.arange(16, dtype=np.float32).reshape(2, 4, 2)
    ep, ret = compute_episodes(st, rw, [4, 0])
    assert ep.tolist() == [[0, 0, 3, 1], [0, 3, 1, 0]]
    assert ret.shape == (2, 2) and ret.dtype == np.float64
    assert ret.tolist() == [[2 + 4, 3 + 5], [0, 0]]
