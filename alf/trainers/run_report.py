"""What a run tells its user: console lines, TensorBoard scalars, evaluation results.

Rank 0 alone prints in a data-parallel run. ``quiet`` silences the progress,
checkpoint and evaluation lines, never warnings or what a resume did.
"""
import math
import sys
import time
from typing import Any, List, Tuple

import torch

from alf import config as alf_config
from alf.metrics import EpisodeMetrics
from alf.trainers.evaluator import evaluate
from alf.utils import precision
from alf.utils.cpu_budget import ThreadGovernor
from alf.utils.run_context import RunContext


class RunReport:
    """Prints and summarises one run.

    Args:
        config: the TrainerConfig (iteration/env-step targets, evaluation settings).
        context: the run context (counters, summary writer).
        governor: the run's thread governor (its CPU-starved note, thread count and CPUs).
        is_main: whether this process prints (rank 0, or the only process).
        quiet: silence progress, checkpoint and evaluation lines.
    """

    def __init__(self, config: Any, context: RunContext, governor: ThreadGovernor,
                 is_main: bool, quiet: bool):
        self._config = config
        self._context = context
        self._governor = governor
        self._is_main = is_main
        self._quiet = quiet or not is_main
        self._last_print = float("-inf")  # perf_counter of the last progress line
        self._bf16_threads = bf16_cpu_threads(config, governor.threads)
        self.precision_line()

    def notice(self, text: str) -> None:
        """Warnings and what a resume did: shown even when quiet; by rank 0 alone."""
        if self._is_main:
            print(text, file=sys.stderr, flush=True)

    def line(self, text: str) -> None:
        """A progress, checkpoint or evaluation line (silenced by ``quiet``)."""
        if not self._quiet:
            print(text, file=sys.stderr, flush=True)

    def precision_line(self) -> None:
        """``[alf] precision: training bf16 (autocast; AMX-BF16), acting fp32`` when either
        ``TrainerConfig.train_precision`` or ``act_precision`` is not fp32."""
        cfg = self._config
        if (cfg.train_precision, cfg.act_precision) != ("fp32", "fp32"):
            # async env workers act on the CPU unless policy workers act on the device
            act_device = ("cpu" if cfg.async_unroll and not cfg.num_policy_workers
                          else cfg.device)
            self.line("[alf] precision: " + precision.describe(
                cfg.train_precision, cfg.act_precision, cfg.device, act_device))
        if self._bf16_threads:
            self.notice(f"[alf] precision: bf16 on the CPU with {self._bf16_threads} torch "
                        "threads: oneDNN's bf16 kernels wait for each other spinning, so next "
                        "to other busy processes (another run, a test suite) this run can "
                        "slow 10-40x; give it a core per thread, or set "
                        "TrainerConfig.num_threads=1 for runs side by side "
                        "(docs/design/mixed_precision.md)")

    def progress_text(self, learner: Any, metrics: EpisodeMetrics, fps: float, elapsed: float,
                      ups: float = 0.0, runner_text: str = "") -> str:
        """``[alf] iter ... | env steps ... | FPS ... | return ...`` (pure offline: updates
        and the evaluation return); ``runner_text``: the learner thread's lag note."""
        ctx, cfg = self._context, self._config
        iters = f"/{cfg.num_iterations:,}" if cfg.num_iterations else ""
        ret = metrics.average_return()
        note = self._governor.progress_note()
        if note and self._bf16_threads:
            note += " (bf16 with several threads: see the precision note at the start)"
        if learner.unroller is None:  # pure offline: no env steps, the return is evaluation's
            return (f"[alf] iter {ctx.iteration:,}{iters} | updates {ctx.num_updates:,} | "
                    f"updates/s {ups:,.0f} | eval return {ret:.1f}{note} | {elapsed:.1f}s")
        target = f"/{cfg.num_env_steps:,}" if cfg.num_env_steps else ""
        # hybrid: updates count too (the offline phase steps no env)
        hybrid = f" | updates {ctx.num_updates:,}" if learner.offline_buffer is not None else ""
        text = getattr(learner.unroller, "progress_text", None)
        unroller = text() if text is not None else ""
        return (f"[alf] iter {ctx.iteration:,}{iters} | env steps {ctx.env_steps:,}{target} | "
                f"FPS {fps:,.0f} | return {ret:.1f} | episodes {metrics.num_episodes:,}"
                f"{hybrid}{unroller}{runner_text}{note} | {elapsed:.1f}s")

    def end_of_iteration(self, log: Any, learner: Any, metrics: EpisodeMetrics, fps: float,
                         ups: float, elapsed: float, wall_time: float, done: bool,
                         first_iteration: int, runner_text: str = "") -> None:
        """The ``progress.csv`` row (at summary intervals, not wall-clock ones, so the file
        is identical between two runs with the same seed) and the console progress line
        (every ``progress_interval_seconds``, at the first and the last iteration)."""
        ctx, cfg = self._context, self._config
        if log is not None and (ctx.iteration % cfg.summary_interval == 0 or done or
                                (cfg.summarize_first_interval and ctx.iteration == 1)):
            log.write([ctx.iteration, ctx.env_steps, f"{wall_time:.3f}",
                       fmt_float(metrics.average_return()), fmt_float(metrics.average_length()),
                       metrics.num_episodes, f"{fps:.1f}"])
        now = time.perf_counter()
        if now - self._last_print >= cfg.progress_interval_seconds or done \
                or ctx.iteration == first_iteration:
            self._last_print = now
            self.line(self.progress_text(learner, metrics, fps, elapsed, ups, runner_text))

    def summarize(self, metrics: EpisodeMetrics, fps: float, iter_seconds: float) -> None:
        """Episode metrics, speed, threads and the unroll/train time split to TensorBoard."""
        ctx, governor = self._context, self._governor
        ret, length = metrics.average_return(), metrics.average_length()
        if not math.isnan(ret):
            ctx.add_scalar("Metrics/AverageReturn", ret)
            ctx.add_scalar("Metrics/AverageEpisodeLength", length)
        ctx.add_scalar("Metrics/NumEpisodes", metrics.num_episodes)
        ctx.add_scalar("Speed/FPS", fps)
        ctx.add_scalar("Speed/torch_threads", governor.threads)  # fixed for the run
        ctx.add_scalar("Speed/cpus_in_use", governor.cpus_in_use)  # follows the load
        if governor.load.wait_share is not None:  # share of time waiting for a CPU
            ctx.add_scalar("Speed/cpu_wait_share", governor.load.wait_share)
        if iter_seconds > 0:
            unroll_share = min(1.0, ctx.unroll_seconds / iter_seconds)
            ctx.add_scalar("Time/unroll_fraction", unroll_share)
            ctx.add_scalar("Time/train_fraction", 1.0 - unroll_share)

    def evaluate(self, algorithm: Any, eval_env: Any, transformer: Any, eval_log: Any = None,
                 wall_time: float = 0.0) -> List[Tuple[float, int]]:
        """Run the evaluation episodes; summarise and print their mean return/length and
        append them to ``eval_log`` (an ``eval.csv`` ProgressLog, when given)."""
        cfg = self._config
        results = evaluate(algorithm, eval_env, transformer, cfg.num_eval_episodes,
                           cfg.epsilon_greedy)
        if not results:
            return results
        avg_ret = sum(r for r, _ in results) / len(results)
        avg_len = sum(n for _, n in results) / len(results)
        self._context.add_scalar("Eval/AverageReturn", avg_ret)
        self._context.add_scalar("Eval/AverageEpisodeLength", avg_len)
        if eval_log is not None:
            returns = [r for r, _ in results]
            std = math.sqrt(sum((r - avg_ret) ** 2 for r in returns) / len(returns))
            eval_log.write([self._context.iteration, self._context.env_steps, f"{wall_time:.3f}",
                            fmt_float(avg_ret), fmt_float(std), fmt_float(min(returns)),
                            fmt_float(max(returns)), fmt_float(avg_len), len(results)])
        self.line(f"[alf] eval at iter {self._context.iteration:,}: return {avg_ret:.1f} "
                  f"over {len(results)} episodes")
        return results

    def warn_unused_bindings(self, builds_envs_here: bool) -> None:
        """After the first iteration every configurable has been built: name the bindings
        nothing used (usually a typo'd or wrong class name, which gin cannot catch).
        ``builds_envs_here``: False when env workers (or nobody) build the envs."""
        unused = alf_config.unused_bindings()
        if not builds_envs_here:
            unused = [b for b in unused if not b.startswith("create_environment.")]
        if unused:
            self.notice("[alf] warning: gin bindings never used (typo, or a class this "
                        f"experiment does not build?): {', '.join(unused)}")


def fmt_float(x: float) -> str:
    """A progress.csv cell: 3 decimals, empty for NaN."""
    return "" if math.isnan(x) else f"{x:.3f}"


def bf16_cpu_threads(config: Any, threads: int) -> int:
    """``threads`` when the run computes in bf16 on the CPU with more than one torch thread
    (training on a CPU device, or a sync rollout acting there), else 0. oneDNN's bf16
    convolution kernels wait for their sibling threads spinning: with more threads than
    free CPUs a forward and backward of the Nature CNN took 0.5-1 s instead of 14 ms
    (two such processes side by side on 2 cores, measured 2026-11-28)."""
    if threads <= 1 or torch.device(config.device).type != "cpu":
        return 0
    train = precision.resolve("train_precision", config.train_precision, config.device)
    act = precision.resolve("act_precision", config.act_precision, config.device)
    acts_here = not config.async_unroll or config.async_mode == "serial"
    return threads if train is not None or (act is not None and acts_here) else 0
