"""``play --record_video PATH`` checks PATH before playing (issue 18, item 5).

It used to play the whole episode and then fail: ``newdir/`` (a directory that does not
exist) gave a 69-line ``ValueError: unknown file extension`` traceback, exit 1, and left a
0-byte file ``newdir``; a path under a regular file, or ``v.txt``, gave 26-31 lines. Now
each is one line on stderr, exit status 2, no episode played and nothing written.

The real command, in subprocesses started together, on one tiny run (trained in-process:
the run is what play reads, not the subject).
"""
import os

import pytest

CASES = {
    # name -> (--record_video value, words the one-line error must contain)
    "missing_dir": ("newdir/", ["--record_video newdir/ is a directory",
                                "newdir/play.mp4"]),
    "under_a_file": ("regular/v.mp4", ["--record_video regular/v.mp4 cannot be written",
                                       "is a file, not a directory"]),
    "txt": ("v.txt", ["--record_video v.txt", "'.txt'", ".mp4", "v.mp4"]),
    "no_extension": ("newvideo", ["--record_video newvideo", "newvideo.mp4"]),
}


@pytest.fixture(scope="module")
def played(tmp_path_factory, alf_cli):
    cwd = tmp_path_factory.mktemp("video_path")
    alf_cli.train_in_process(cwd / "run", params=["TrainerConfig.num_iterations=1"])
    (cwd / "regular").write_text("not a directory\n")
    before = sorted(os.listdir(cwd))
    procs = {name: alf_cli.start("alf.bin.play", ["--root_dir", "run", "--num_episodes", "1",
                                                  "--record_video", path], cwd)
             for name, (path, _) in CASES.items()}
    results = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=180)
        results[name] = (proc.returncode, out, err)
    return cwd, before, results


@pytest.mark.parametrize("name", list(CASES))
def test_bad_video_path_is_one_line_before_playing(played, name):
    cwd, before, results = played
    code, out, err = results[name]
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("alf.bin.play: error: --record_video "), lines[0]
    for word in CASES[name][1]:
        assert word in lines[0], (word, lines[0])
    assert out == ""  # no episode was played
    assert sorted(os.listdir(cwd)) == before  # nothing written (no `newdir`, no `v.txt`)
    assert (cwd / "regular").read_text() == "not a directory\n"
