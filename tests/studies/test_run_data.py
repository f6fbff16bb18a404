"""eval.csv is written per evaluation, cut back on resume like progress.csv, and read back
as a Curve."""
import numpy as np

from alf.studies.run_data import read_curve
from alf.trainers.progress_log import EVAL_HEADER, RunLogs


def _eval_row(iteration, steps, ret):
    return [iteration, steps, f"{iteration * 0.5:.3f}", f"{ret:.3f}", "1.000", "0.000",
            "9.000", "20.000", 10]


def test_eval_log_rows_past_the_restored_iteration_are_dropped(tmp_path):
    logs = RunLogs(str(tmp_path), keep_through_iteration=0)
    for it in (10, 20, 30):
        logs.eval.write(_eval_row(it, it * 100, it / 10))
        logs.progress.write([it, it * 100, "0.1", "1.0", "1.0", 3, "100.0"])
    logs.close()
    assert (tmp_path / "eval.csv").read_text().splitlines()[0] == ",".join(EVAL_HEADER)

    resumed = RunLogs(str(tmp_path), keep_through_iteration=20)  # checkpoint at 20
    assert resumed.dropped_rows == {"progress.csv": 1, "eval.csv": 1}
    resumed.eval.write(_eval_row(30, 3000, 7.0))
    resumed.close()
    curve = read_curve(str(tmp_path), "eval_return")
    np.testing.assert_array_equal(curve.env_steps, [1000, 2000, 3000])
    np.testing.assert_allclose(curve.values, [1.0, 2.0, 7.0])
    np.testing.assert_allclose(curve.wall_time_s, [5.0, 10.0, 15.0])
    train = read_curve(str(tmp_path), "train_return")
    np.testing.assert_array_equal(train.env_steps, [1000, 2000])


def test_a_row_cut_short_and_empty_values_are_skipped(tmp_path):
    (tmp_path / "progress.csv").write_text(
        "iteration,env_steps,wall_time_s,average_return,average_episode_length,"
        "num_episodes,fps\n1,256,0.1,,,0,100\n2,512,0.2,12.5,12.5,3,100\n3,768,0.3,1")
    curve = read_curve(str(tmp_path), "train_return")
    np.testing.assert_array_equal(curve.env_steps, [512])
    assert len(read_curve(str(tmp_path / "missing"), "eval_return")) == 0


def test_unknown_metric_names_the_choices(tmp_path):
    import pytest
    with pytest.raises(ValueError, match="eval_return, train_return"):
        read_curve(str(tmp_path), "eval_retrun")
